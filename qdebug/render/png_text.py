"""What a PNG says and where: every drawn text's box, kept in the PNG itself, and titles wrapped to fit.

A picture that clips or overlaps its own words is a picture nobody can read; `save` records each text that was
really drawn (with its box in the saved image's pixels, top-left origin) under TEXT_KEY, so a test checks the file.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

TEXT_KEY = "qdebug-text"
DPI = 110  # every PNG qdebug writes


def _drawn_texts(fig) -> list:
    """The Text artists a full draw of `fig` really draws (not hidden tick labels of axes turned off, not empty ones)."""
    from matplotlib.text import Text

    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)  # ticks and their labels are made while drawing
    texts = [t for t in fig.findobj(Text) if t.get_text().strip()]
    drawn: list = []

    def watch(t):
        def draw(r, *args, **kwargs):
            if t.get_visible() and all(t is not d for d in drawn):
                drawn.append(t)
            return type(t).draw(t, r, *args, **kwargs)

        return draw

    for t in texts:  # on the instances only: nothing global changes (a TUI export draws in a worker thread)
        t.draw = watch(t)
    try:
        fig.draw(renderer)
    finally:
        for t in texts:
            del t.draw
    return drawn


def text_boxes(fig) -> list[tuple[str, tuple[float, float, float, float]]]:
    """(text, (x0, y0, x1, y1)) of every text drawn, in pixels of the saved image, y down from its top."""
    fig.set_dpi(DPI)
    height = fig.bbox.height
    renderer = fig.canvas.get_renderer()
    out = []
    from matplotlib.text import Text

    for t in _drawn_texts(fig):
        b = Text.get_window_extent(t, renderer)  # the words only: an annotation's own extent includes its arrow
        out.append((t.get_text(), (b.x0, height - b.y1, b.x1, height - b.y0)))
    return out


def wrap_to_fit(fig, margin: float = 6.0) -> None:
    """Re-wrap every figure and axes title wider than its room (the figure, or its axes) so nothing is cut."""
    fig.set_dpi(DPI)
    renderer = fig.canvas.get_renderer()
    titles = [t for t in (fig._suptitle,) if t is not None]
    for ax in fig.axes:
        titles += [ax.title, ax._left_title, ax._right_title]
    for t in titles:
        text = t.get_text()
        if not text.strip():
            continue
        room = fig.bbox.width - 2 * margin
        for _ in range(6):  # a few rounds: each narrows the wrap by what the last one overshot
            width = t.get_window_extent(renderer).width
            if width <= room:
                break
            longest = max(len(line) for line in t.get_text().splitlines())
            chars = max(12, int(longest * room / width) - 1)
            t.set_text("\n".join(textwrap.fill(line, chars) for line in text.splitlines()))


def shape_boxes(fig) -> list[tuple[float, float, float, float]]:
    """Boxes of the rectangles drawn in the axes (bars), in the same pixels as `text_boxes`."""
    from matplotlib.patches import Rectangle

    height = fig.bbox.height
    renderer = fig.canvas.get_renderer()
    out = []
    for ax in fig.axes:
        for p in ax.patches:
            if isinstance(p, Rectangle) and p.get_visible():
                b = p.get_window_extent(renderer)
                out.append((b.x0, height - b.y1, b.x1, height - b.y0))
    return out


def save(fig, path: str | Path, metadata: dict | None = None) -> Path:
    """Write `fig` as a PNG at DPI, atomically, with the box of every text it draws under TEXT_KEY; then close it."""
    import matplotlib.pyplot as plt

    from qdebug.atomic import atomic_path

    try:
        boxes = text_boxes(fig)
        record = {"size": [fig.bbox.width, fig.bbox.height], "boxes": [[s, *box] for s, box in boxes], "shapes": shape_boxes(fig)}
        meta = {**(metadata or {}), TEXT_KEY: json.dumps(record)}
        with atomic_path(path) as tmp:  # as files.write_atomically (which imports this module for save_png)
            fig.savefig(tmp, dpi=DPI, format="png", metadata=meta)
        return Path(path)
    finally:
        plt.close(fig)


def read_text_boxes(png: str | Path) -> tuple[tuple[int, int], list[tuple[str, tuple[float, float, float, float]]]]:
    """((width, height) of the image, [(text, box)]) as `save` recorded them in the file."""
    size, boxes, _ = read_layout(png)
    return size, boxes


def read_layout(png: str | Path):
    """((width, height), [(text, box)], [shape box]) as `save` recorded them in the file."""
    from PIL import Image

    with Image.open(png) as im:
        record = json.loads(im.info[TEXT_KEY])
        return im.size, [(b[0], tuple(b[1:])) for b in record["boxes"]], [tuple(b) for b in record.get("shapes", [])]
