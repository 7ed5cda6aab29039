"""Pixels for thumbnails: the live request's images, or the file a trace names when it still exists."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=16)
def _load(path: str, mtime: float):
    from qdebug.trace.request import load_image

    return load_image(path)


def pil_image(doc, index: int):
    """The PIL image of image `index` of the document on screen, or None when its pixels aren't available."""
    if doc.pil_images is not None and index < len(doc.pil_images):
        return doc.pil_images[index]
    if index >= len(doc.trace.images):
        return None
    path = Path(doc.trace.images[index].path)
    try:
        return _load(str(path), path.stat().st_mtime) if path.is_file() else None
    except Exception:  # a corrupt or unreadable file: show the placeholder instead
        return None
