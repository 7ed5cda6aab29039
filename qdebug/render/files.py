"""Atomic file output for renderers (PNG, JSON)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from qdebug.atomic import atomic_path


def write_atomically(path: str | Path, write: Callable[[Path], None]) -> Path:
    """Call write(tmp_path), then move tmp_path to `path`; on any error nothing is left behind."""
    with atomic_path(path) as tmp:
        write(tmp)
    return Path(path)


def write_text_atomically(path: str | Path, text: str) -> Path:
    """Write a text file atomically."""
    return write_atomically(path, lambda p: p.write_text(text))
