"""Shared pieces of the commands: consoles, progress on terminals only, JSON output."""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from pathlib import Path


def consoles(json_to_stdout: bool):
    """(report console, status console): the report goes to stderr when stdout carries JSON."""
    from rich.console import Console

    report = Console(stderr=json_to_stdout, highlight=False)
    if not report.is_terminal:  # piped or captured: wide enough that tables don't fold every word
        report = Console(stderr=json_to_stdout, highlight=False, width=160)
    return report, Console(stderr=True, highlight=False)


@contextmanager
def progress(console, description: str):
    """A Rich spinner on a terminal; silent otherwise."""
    if console.is_terminal:
        with console.status(description):
            yield
    else:
        yield


def quiet_transformers() -> None:
    """Silence transformers' progress bars and warnings (qdebug reports what matters itself)."""
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    from transformers.utils import logging

    logging.set_verbosity_error()
    logging.disable_progress_bar()


def emit_json(data: dict, target: str | None) -> None:
    """Write JSON to a path (atomically) or to stdout for `-`."""
    if target is None:
        return
    text = json.dumps(data, indent=2, ensure_ascii=False)
    if target == "-":
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
        return
    from qdebug.render.files import write_text_atomically

    write_text_atomically(Path(target), text + "\n")


@contextmanager
def loading(spec: str):
    """Around model loading: Ctrl-C or SIGTERM here says so, and that no output was written."""
    from qdebug.errors import Interrupted
    from qdebug.signals import Terminated

    try:
        yield
    except Terminated:
        raise Interrupted(f"terminated (SIGTERM) while loading the model {spec}; no output was written", 143) from None
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted while loading the model {spec}; no output was written (existing files are untouched)") from None
