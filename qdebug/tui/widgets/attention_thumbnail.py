"""The attention panel's thumbnail: the image as half blocks (or a shade ramp) at the heatmap's size, cached."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text

from qdebug.render.data_text import data

from ..images import pil_image


def placeholder(img, s: int, name: str):
    """A dim box the thumbnail's size, saying that the image file `name` is not available."""
    from rich.panel import Panel

    note = Text("image not available\n", style="dim", justify="center")
    note.append(data(name, "dim"))  # a trace's file name: data
    return Panel(note, width=max(14, img.cols * s), height=max(3, (img.rows * s + 1) // 2), border_style="dim")


_thumbs: dict = {}


def thumbnail(doc, index: int, img, size: int, s: int, plain: bool = False):
    """The image as half blocks (a ramp when `plain`) at the heatmap's size (cached: it does not change with
    layer, head or query)."""
    from qdebug.render.heatmap import image_ramp, image_text

    key = (doc, index, size, plain)
    if key not in _thumbs:
        if len(_thumbs) > 32:
            _thumbs.clear()
        pil = pil_image(doc, index)
        draw = image_ramp if plain else image_text
        _thumbs[key] = draw(pil, img.rows, img.cols, width=size) if pil is not None else placeholder(img, s, Path(img.path).name)
    return _thumbs[key]
