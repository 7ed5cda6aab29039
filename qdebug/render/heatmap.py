"""Terminal pictures: an attention grid and an image thumbnail as half blocks in colour, or as a character ramp
where the console has no colour (piped, NO_COLOR)."""

from __future__ import annotations

from functools import lru_cache

from rich.style import Style
from rich.text import Text

from .colors import scale_color
from .data_text import data


@lru_cache(maxsize=4096)
def _style(fg: tuple[int, int, int], bg: tuple[int, int, int] | None) -> Style:
    return Style(color=f"rgb{fg}", bgcolor=f"rgb{bg}" if bg else None)


def _half_blocks(pixels: list[list[tuple[int, int, int]]]) -> Text:
    """Render an RGB pixel matrix two pixel rows per line with '▀' (top = fg, bottom = bg).

    Runs of equal cells become one span (a heatmap cell is several pixels wide): fewer spans, faster frames."""
    text = Text()
    for y in range(0, len(pixels), 2):
        top = pixels[y]
        bottom = pixels[y + 1] if y + 1 < len(pixels) else [None] * len(top)
        x = 0
        while x < len(top):
            pair = (top[x], bottom[x])
            end = x + 1
            while end < len(top) and (top[end], bottom[end]) == pair:
                end += 1
            text.append("▀" * (end - x), _style(*pair))
            x = end
        text.append("\n")
    text.rstrip()
    return text


def cell_scale(rows: int, cols: int, width: int = 32) -> int:
    """Pixels per grid cell so the picture is about `width` characters wide."""
    return max(1, width // max(1, cols, rows))


def _normalised(grid, width: int) -> tuple[list[list[float]], int]:
    """A grid's values scaled to 0..1 over its own range (a flat grid: all 0), and its pixels per cell."""
    values = [[float(v) for v in row] for row in grid.tolist()]
    hi = max((v for row in values for v in row), default=0.0)
    lo = min((v for row in values for v in row), default=0.0)
    span = (hi - lo) or 1.0
    return [[(v - lo) / span for v in row] for row in values], cell_scale(len(values), len(values[0]) if values else 1, width)


def heatmap_text(grid, *, width: int = 32, marker: tuple[int, int] | None = None) -> Text:
    """A `rows × cols` grid as coloured half blocks, normalised to its own max; `marker` cell outlined white."""
    values, s = _normalised(grid, width)
    pixels = []
    for r, row in enumerate(values):
        line = []
        for c, v in enumerate(row):
            colour = scale_color(v)
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
    flat = list(small.getdata())
    pixels = [flat[y * w : (y + 1) * w] for y in range(h)]
    return _half_blocks(pixels)


def legend_text(lo: float, hi: float, width: int = 24) -> Text:
    """A horizontal colour bar with its low and high values."""
    text = Text(f"{lo:.3g} ")
    for i in range(width):
        text.append("█", Style(color=f"rgb{scale_color(i / max(1, width - 1))}"))
    text.append(f" {hi:.3g}")
    return text


# Without colour every half block looks the same; density carries the value instead (dark → light = low → high).
RAMP = " .:-=+*#%@"


# The image beside it uses shade blocks, none of the heatmap's symbols: a light background must never read as the
# heatmap's hottest cell (`@`).
IMAGE_RAMP = " ░▒▓█"


def _ramp_char(x: float, ramp: str = RAMP) -> str:
    x = 0.0 if x != x else min(1.0, max(0.0, x))  # NaN → the blank end
    return ramp[min(len(ramp) - 1, int(x * len(ramp)))]


def _ramp_lines(values: list[list[float]], s: int, marker: tuple[int, int] | None = None) -> Text:
    """Each cell `s` characters wide and about s/2 lines tall (the half-block picture's footprint), framed so
    the blank low end still shows where the grid is."""
    lines_per_row = max(1, (s + 1) // 2)
    inner = s * (len(values[0]) if values else 0)
    text = Text("┌" + "─" * inner + "┐\n")
    for r, row in enumerate(values):
        cells = []
        for c, x in enumerate(row):
            ch = _ramp_char(x)
            cell = ch * s
            if marker == (r, c) and s >= 3:  # the peak, bracketed so it is found at a glance
                cell = "[" + ch * (s - 2) + "]"
            cells.append(cell)
        line = "│" + "".join(cells) + "│"
        for _ in range(lines_per_row):
            text.append(line + "\n")
    text.append("└" + "─" * inner + "┘")
    return text


def heatmap_ramp(grid, *, width: int = 32, marker: tuple[int, int] | None = None) -> Text:
    """A `rows × cols` grid as a character ramp (` .:-=+*#%@`), normalised to its own range; `marker` in brackets."""
    values, s = _normalised(grid, width)
    return _ramp_lines(values, s, marker)


def image_ramp(image, rows: int, cols: int, *, width: int = 32) -> Text:
    """A PIL image's luminance as shade blocks (`IMAGE_RAMP`) at the heatmap's size."""
    s = cell_scale(rows, cols, width)
    small = image.convert("L").resize((max(1, cols * s), max(1, rows * ((s + 1) // 2))))
    w = small.width
    pixels = list(small.getdata())
    text = Text()
    for y in range(small.height):
        text.append(data("".join(_ramp_char(v / 255, IMAGE_RAMP) for v in pixels[y * w : (y + 1) * w]) + "\n", newlines=True))
    text.rstrip()
    return text


def legend_ramp(lo: float, hi: float) -> Text:
    """The ramp with its low and high values."""
    return data(f"{lo:.3g} {RAMP.replace(' ', '·', 1)} {hi:.3g}")


def colourless(console) -> bool:
    """Whether `console` shows no colour: piped/captured output, or NO_COLOR set."""
    return bool(console.no_color or console.color_system is None)


class _Either:
    """A picture drawn in colour where the console has it, and as a character ramp where it has not."""

    def __init__(self, colour, plain, plain_override: bool | None = None):
        self._colour, self._plain, self.plain = colour, plain, plain_override

    def _pick(self, console) -> Text:
        plain = self.plain if self.plain is not None else colourless(console)
        return self._plain() if plain else self._colour()

    def __rich_console__(self, console, options):
        yield self._pick(console)

    def __rich_measure__(self, console, options):
        from rich.measure import Measurement

        return Measurement.get(console, options, self._pick(console))


def heatmap(grid, *, width: int = 32, marker: tuple[int, int] | None = None, plain: bool | None = None):
    """The heatmap as half blocks, or as a ramp on a colourless console (`plain` forces one or the other)."""
    return _Either(lambda: heatmap_text(grid, width=width, marker=marker), lambda: heatmap_ramp(grid, width=width, marker=marker), plain)


def thumbnail(image, rows: int, cols: int, *, width: int = 32, plain: bool | None = None):
    """The image as half blocks, or its luminance as a ramp on a colourless console."""
    return _Either(lambda: image_text(image, rows, cols, width=width), lambda: image_ramp(image, rows, cols, width=width), plain)


def legend(lo: float, hi: float, width: int = 24, plain: bool | None = None):
    """The colour bar, or the character ramp on a colourless console."""
    return _Either(lambda: legend_text(lo, hi, width), lambda: legend_ramp(lo, hi), plain)
