"""Pixels for thumbnails: the live request's images, or the file a trace names, found where the trace came from."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=16)
def _load(path: str, mtime: float):
    from qdebug.trace.request import load_image

    return load_image(path)


def image_dirs_for(document: str | Path | None = None, capture: str | None = None, capture_dir: str | None = None) -> tuple[Path, ...]:
    """Folders where a trace's relative image paths may be, besides the working directory: a capture's paths are
    relative to the capture's folder, and a saved trace or report may have moved with its images beside it.

    `document`: the .qdt / .qdr file opened (None: not from a file); `capture`: the report's source (a capture);
    `capture_dir`: that capture's absolute folder as the .qdr recorded it when saved."""
    dirs: list[Path] = [Path(capture_dir)] if capture_dir else []
    here = Path(document).expanduser().parent if document and Path(document).suffix in (".qdt", ".qdr") else None
    if capture:
        source = Path(capture).expanduser()
        dirs.append(source.parent)
        if here is not None and not source.is_absolute():  # the report moved with its capture folder beside it
            dirs.append(here / source.parent)
    if here is not None:
        dirs.append(here)
    unique: list[Path] = []
    for d in dirs:
        if d not in unique:
            unique.append(d)
    return tuple(unique)


def image_candidates(doc, index: int) -> list[Path]:
    """Where image `index` of `doc` may be, in the order tried: as named, then under each of the doc's image folders
    (the path as named, then its file name alone)."""
    named = Path(doc.trace.images[index].path)
    if named.is_absolute():
        return [named]
    tried = [named]
    for folder in doc.image_dirs:
        for candidate in (folder / named, folder / named.name):
            if candidate not in tried:
                tried.append(candidate)
    return tried


def pil_image(doc, index: int):
    """The PIL image of image `index` of the document on screen, or None when its pixels aren't available."""
    if doc.pil_images is not None and index < len(doc.pil_images):
        return doc.pil_images[index]
    if index >= len(doc.trace.images) or doc.trace.images[index].path.startswith(("vllm:", "data:")):
        return None
    for path in image_candidates(doc, index):
        try:
            if path.is_file():
                return _load(str(path), path.stat().st_mtime)
        except Exception:  # a corrupt or unreadable file: try the next place, else show the placeholder
            continue
    return None


def missing_image_note(doc, index: int) -> str:
    """Why there are no pixels: the image's name and every folder looked in."""
    name = doc.trace.images[index].path
    if name.startswith(("vllm:", "data:")):
        return f"image {index}: not kept in the trace ({name.split(':')[0]}: source)"
    places = sorted({str(p.parent) or "." for p in image_candidates(doc, index)}, key=lambda p: (p != ".", p))
    return f"image {index} not found: {name} (looked in {', '.join(places)})"
