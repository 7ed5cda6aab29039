"""`python -m qdebug` runs the CLI."""

from qdebug.cli import main

if __name__ == "__main__":
    main()
