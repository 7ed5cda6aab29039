"""The image with its attention grid laid over it (PIL), for terminals that show pixels (Sixel, Kitty)."""

from __future__ import annotations

from .colors import scale_color


def overlay_image(image, grid, *, peak: tuple[int, int] | None = None, alpha: float = 0.55, size: int = 256):
    """`image` (PIL) resized to fit `size`, the `rows × cols` grid (normalised to its range) blended on top in
    the heatmap's colours, the `peak` cell outlined in white."""
    from PIL import Image, ImageDraw

    values = [[float(v) for v in row] for row in grid.tolist()]
    rows, cols = len(values), len(values[0]) if values else 1
    lo = min((v for row in values for v in row), default=0.0)
    hi = max((v for row in values for v in row), default=0.0)
    span = (hi - lo) or 1.0
    cell = max(1, size // max(rows, cols))
    w, h = cols * cell, rows * cell
    base = image.convert("RGB").resize((w, h))
    heat = Image.new("RGB", (cols, rows))
    heat.putdata([scale_color((v - lo) / span) for row in values for v in row])
    blended = Image.blend(base, heat.resize((w, h), Image.Resampling.NEAREST), alpha)
    if peak is not None:
        r, c = peak
        ImageDraw.Draw(blended).rectangle([c * cell, r * cell, (c + 1) * cell - 1, (r + 1) * cell - 1], outline=(255, 255, 255), width=max(1, cell // 12))
    return blended
