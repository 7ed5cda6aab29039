"""Regenerate the sample scene images in this folder (deterministic)."""

import random
from pathlib import Path

from qdebug.demo.scenes import make_scene

SCENES = [
    # file name, width, height, colour, shape, quadrant
    ("red_circle_top_left.png", 168, 112, "red", "circle", "top left"),
    ("blue_square_bottom_right.png", 224, 224, "blue", "square", "bottom right"),
    ("green_triangle_top_right.png", 112, 196, "green", "triangle", "top right"),
    ("yellow_circle_bottom_left.png", 84, 84, "yellow", "circle", "bottom left"),
    ("red_triangle_bottom_right.png", 196, 140, "red", "triangle", "bottom right"),
    ("blue_circle_top_right.png", 140, 84, "blue", "circle", "top right"),
]


def main() -> None:
    """Write every sample scene next to this script."""
    here = Path(__file__).parent
    for i, (name, w, h, colour, shape, quadrant) in enumerate(SCENES):
        scene = make_scene(random.Random(100 + i), width=w, height=h, colour=colour, shape=shape, quadrant=quadrant)
        scene.image.save(here / name)


if __name__ == "__main__":
    main()
