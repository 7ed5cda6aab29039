"""The procedural scenes follow the demo spec (sizes, colours, one shape inside one quadrant)."""

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from qdebug.demo.scenes import BACKGROUND, COLOURS, QUADRANTS, SHAPES, caption_for, cell_in_quadrant, make_scene


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_scene_follows_spec(seed):
    s = make_scene(random.Random(seed))
    w, h = s.image.size
    assert w % 28 == 0 and h % 28 == 0 and 84 <= w <= 224 and 84 <= h <= 224
    assert s.colour in COLOURS and s.shape in SHAPES and s.quadrant in QUADRANTS
    x0, y0, x1, y1 = s.box
    assert abs((x1 - x0) - 0.4 * min(w, h)) <= 1
    # The shape lies wholly inside its quadrant.
    left = s.quadrant.endswith("left")
    top = s.quadrant.startswith("top")
    assert (x1 <= w // 2) if left else (x0 >= w // 2)
    assert (y1 <= h // 2) if top else (y0 >= h // 2)
    # Only the background and the shape's colour appear (no anti-aliasing in PIL's fills).
    colours = {c for _, c in s.image.getcolors(maxcolors=w * h)}
    assert colours <= {BACKGROUND, COLOURS[s.colour]} and COLOURS[s.colour] in colours
    assert s.caption == caption_for(s.colour, s.shape, s.quadrant)


def test_caption_format():
    assert caption_for("red", "circle", "top left") == "a red circle in the top left"


def test_cell_in_quadrant_counts_midline_for_both_halves():
    assert cell_in_quadrant(0, 0, 4, 4, "top left")
    assert not cell_in_quadrant(2, 0, 4, 4, "top left")
    assert cell_in_quadrant(1, 1, 3, 3, "top left") and cell_in_quadrant(1, 1, 3, 3, "bottom right")
    assert not cell_in_quadrant(0, 2, 3, 3, "top left")
