"""Terminal pictures with half-block cells: an attention grid and an image thumbnail (Rich Text)."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text

from .colors import scale_color


def _half_blocks(pixels: list[list[tuple[int, int, int]]]) -> Text:
    """Render an RGB pixel matrix two pixel rows per line with '▀' (top = fg, bottom = bg)."""
    text = Text()
    for y in range(0, len(pixels), 2):
        top = pixels[y]
        bottom = pixels[y + 1] if y + 1 < len(pixels) else None
        for x, fg in enumerate(top):
            bg = bottom[x] if bottom is not None else None
            style = Style(color=f"rgb{fg}", bgcolor=f"rgb{bg}" if bg else None)
            text.append("▀", style)
        text.append("\n")
    text.rstrip()
    return text


def cell_scale(rows: int, cols: int, width: int = 32) -> int:
    """Pixels per grid cell so the picture is about `width` characters wide."""
    return max(1, width // max(1, cols, rows))


def heatmap_text(grid, *, width: int = 32, marker: tuple[int, int] | None = None) -> Text:
    """A `rows × cols` grid as coloured half blocks, normalised to its own max; `marker` cell outlined white."""
    values = [[float(v) for v in row] for row in grid.tolist()]
    hi = max((v for row in values for v in row), default=0.0)
    lo = min((v for row in values for v in row), default=0.0)
    span = (hi - lo) or 1.0
    s = cell_scale(len(values), len(values[0]) if values else 1, width)
    pixels = []
    for r, row in enumerate(values):
        line = []
        for c, v in enumerate(row):
            colour = scale_color((v - lo) / span)
            line.extend([colour] * s)
            if marker == (r, c) and s >= 3:
                line[-s] = line[-1] = (255, 255, 255)
        pixels.extend([list(line) for _ in range(s)])
    return _half_blocks(pixels)


def image_text(image, rows: int, cols: int, *, width: int = 32) -> Text:
    """A thumbnail of a PIL image at the same pixel size as `heatmap_text` draws a rows × cols grid."""
    s = cell_scale(rows, cols, width)
    w, h = max(1, cols * s), max(1, rows * s)
    small = image.convert("RGB").resize((w, h))
    data = list(small.getdata())
    pixels = [data[y * w : (y + 1) * w] for y in range(h)]
    return _half_blocks(pixels)


def legend_text(lo: float, hi: float, width: int = 24) -> Text:
    """A horizontal colour bar with its low and high values."""
    text = Text(f"{lo:.3g} ")
    for i in range(width):
        text.append("█", Style(color=f"rgb{scale_color(i / max(1, width - 1))}"))
    text.append(f" {hi:.3g}")
    return text
