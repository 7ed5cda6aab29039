"""Checks a PNG qdebug wrote against the text boxes it carries: nothing clipped, no two texts on each other."""

from __future__ import annotations

import itertools

from qdebug.render.png_text import read_layout


def _overlap(a, b, slack: float = 0.5) -> bool:
    return min(a[2], b[2]) - max(a[0], b[0]) > slack and min(a[3], b[3]) - max(a[1], b[1]) > slack


def assert_readable(png, *, labels: list[str] | None = None) -> list[tuple[str, tuple]]:
    """Every drawn text lies inside the image, no two overlap; `labels` (a timeline's) also cross no bar."""
    (width, height), boxes, shapes = read_layout(png)
    assert boxes, f"{png}: no text recorded"
    clipped = [(s, b) for s, b in boxes if b[0] < -0.5 or b[1] < -0.5 or b[2] > width + 0.5 or b[3] > height + 0.5]
    assert not clipped, f"{png} ({width}×{height}) cuts: {clipped}"
    crossed = [(a, b) for (a, ba), (b, bb) in itertools.combinations(boxes, 2) if _overlap(ba, bb)]
    assert not crossed, f"{png}: texts on each other: {crossed}"
    if labels is not None:
        boxed = [(s, b) for s, b in boxes if s in labels]
        assert len(boxed) == len(labels)
        on_bars = [s for s, b in boxed if any(_overlap(b, shape, slack=1.5) for shape in shapes)]
        assert not on_bars, f"{png}: labels across bars: {on_bars}"
    return boxes
