"""Atomic file output for renderers (PNG, JSON)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from qdebug.atomic import atomic_path


def write_atomically(path: str | Path, write: Callable[[Path], object]) -> Path:
    """Call write(tmp_path), then move tmp_path to `path`; on any error nothing is left behind."""
    with atomic_path(path) as tmp:
        write(tmp)
    return Path(path)


def write_text_atomically(path: str | Path, text: str) -> Path:
    """Write a text file atomically."""
    return write_atomically(path, lambda p: p.write_text(text))


def pyplot():
    """matplotlib.pyplot on the Agg backend (files only, no display), imported when a PNG is first drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_png(fig, path: str | Path) -> Path:
    """Write `fig` to `path` as a PNG (atomically, its texts' boxes inside: `png_text`), then close it, written or not."""
    from .png_text import save

    return save(fig, path)
