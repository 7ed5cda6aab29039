"""A perceptual colour scale (inferno stops) for heatmaps, without matplotlib."""

from __future__ import annotations

_INFERNO = [
    (0, 0, 4), (31, 12, 72), (85, 15, 109), (136, 34, 106), (186, 54, 85),
    (227, 89, 51), (249, 140, 10), (249, 201, 50), (252, 255, 164),
]


def scale_color(x: float) -> tuple[int, int, int]:
    """RGB of value x in [0, 1] on the inferno scale (clamped)."""
    x = 0.0 if x != x else min(1.0, max(0.0, x))  # NaN → 0
    pos = x * (len(_INFERNO) - 1)
    i = min(int(pos), len(_INFERNO) - 2)
    f = pos - i
    a, b = _INFERNO[i], _INFERNO[i + 1]
    r, g, b_ = (round(a[c] + (b[c] - a[c]) * f) for c in range(3))
    return r, g, b_
