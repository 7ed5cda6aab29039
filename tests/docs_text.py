"""The documentation the tests hold to the code: README.md, then the pages of the MkDocs site in its nav order."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def nav_pages() -> list[Path]:
    """The site's pages in mkdocs.yml's nav order (read from its `name: path.md` entries)."""
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8").split("nav:", 1)[1]
    return [DOCS / name for name in re.findall(r":\s*([\w/.-]+\.md)\s*$", nav, re.M)]


def documentation_files() -> list[Path]:
    """README.md first, then every page of the site."""
    return [ROOT / "README.md", *nav_pages()]


def documentation_text() -> str:
    """Every documentation file's text, in documentation_files() order."""
    return "\n".join(path.read_text(encoding="utf-8") for path in documentation_files())
