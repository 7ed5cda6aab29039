"""Tolerances for comparing two runs, by the less precise dtype of the pair.

A stage agrees when max |a - b| <= atol + rtol * max |a|. rtol is about one unit in the last place of the
dtype at the tensor's largest magnitude (float32 gets headroom for kernels that sum in another order),
so a stage diverges when the runs differ by more than one rounding of the dtype they ran in.
"""

from __future__ import annotations

from dataclasses import dataclass

_BY_DTYPE = {
    "float32": (1e-5, 1e-4),
    "float16": (1e-3, 2e-3),
    "bfloat16": (1e-2, 1.6e-2),
}
_RANK = {"float32": 0, "float16": 1, "bfloat16": 2}


@dataclass(frozen=True)
class Tolerance:
    """Absolute and relative tolerance of one comparison."""

    atol: float
    rtol: float

    def allows(self, max_abs: float, scale: float) -> bool:
        """Whether a max abs difference is within tolerance for values of magnitude `scale`."""
        return max_abs <= self.atol + self.rtol * scale


def tolerance_for(dtype_a: str, dtype_b: str, atol: float | None = None, rtol: float | None = None) -> Tolerance:
    """The tolerance of the less precise of two dtypes, with user overrides."""
    worst = max((dtype_a, dtype_b), key=lambda d: _RANK.get(d, 0))
    a, r = _BY_DTYPE.get(worst, _BY_DTYPE["float32"])
    return Tolerance(atol if atol is not None else a, rtol if rtol is not None else r)
