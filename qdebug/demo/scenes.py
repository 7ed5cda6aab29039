"""Procedural scenes for the demo model: one coloured shape in one quadrant of a grey canvas."""

from __future__ import annotations

import random
from dataclasses import dataclass

from PIL import Image, ImageDraw

BACKGROUND = (245, 245, 245)
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 30, 30),
    "green": (30, 160, 60),
    "blue": (40, 60, 220),
    "yellow": (230, 200, 20),
}
SHAPES = ("circle", "square", "triangle")
QUADRANTS = ("top left", "top right", "bottom left", "bottom right")
SIDES = tuple(range(84, 225, 28))  # every side a multiple of 28 in [84, 224]
PROMPTS = (
    "Describe the image.",
    "What is in the picture?",
    "Caption this image.",
    "What do you see?",
)


@dataclass(frozen=True)
class Scene:
    """One procedural scene: the picture, its caption and where the shape is."""

    image: Image.Image
    colour: str
    shape: str
    quadrant: str
    box: tuple[int, int, int, int]  # x0, y0, x1, y1 of the shape in pixels

    @property
    def caption(self) -> str:
        """The exact caption the demo model is trained to produce."""
        return caption_for(self.colour, self.shape, self.quadrant)


def caption_for(colour: str, shape: str, quadrant: str) -> str:
    """Caption text for a scene: `a {colour} {shape} in the {quadrant}`."""
    return f"a {colour} {shape} in the {quadrant}"


def cell_in_quadrant(row: int, col: int, rows: int, cols: int, quadrant: str) -> bool:
    """Whether cell (row, col) of a rows × cols grid has its centre in `quadrant` (the midline counts for both)."""
    vertical, horizontal = quadrant.split()
    r2, c2 = 2 * row + 1, 2 * col + 1  # doubled centre, compared with the doubled midline
    in_rows = r2 <= rows if vertical == "top" else r2 >= rows
    in_cols = c2 <= cols if horizontal == "left" else c2 >= cols
    return in_rows and in_cols


def make_scene(
    rng: random.Random,
    *,
    width: int | None = None,
    height: int | None = None,
    colour: str | None = None,
    shape: str | None = None,
    quadrant: str | None = None,
) -> Scene:
    """Draw one scene; unspecified attributes are drawn from `rng`."""
    width = width or rng.choice(SIDES)
    height = height or rng.choice(SIDES)
    colour = colour or rng.choice(list(COLOURS))
    shape = shape or rng.choice(SHAPES)
    quadrant = quadrant or rng.choice(QUADRANTS)

    side = max(8, round(0.4 * min(width, height)))
    qw, qh = width // 2, height // 2
    qx = qw if quadrant.endswith("right") else 0
    qy = qh if quadrant.startswith("bottom") else 0
    # Jitter the shape anywhere it still fits wholly inside its quadrant.
    x0 = qx + rng.randint(0, max(0, qw - side))
    y0 = qy + rng.randint(0, max(0, qh - side))
    box = (x0, y0, x0 + side, y0 + side)

    image = Image.new("RGB", (width, height), BACKGROUND)
    draw = ImageDraw.Draw(image)
    fill = COLOURS[colour]
    if shape == "circle":
        draw.ellipse(box, fill=fill)
    elif shape == "square":
        draw.rectangle(box, fill=fill)
    else:
        draw.polygon([(x0 + side / 2, y0), (x0, y0 + side), (x0 + side, y0 + side)], fill=fill)
    return Scene(image=image, colour=colour, shape=shape, quadrant=quadrant, box=box)
