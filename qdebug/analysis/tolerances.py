"""Tolerances for comparing two runs, by the less precise dtype of the pair.

A stage agrees when every element of every token row agrees:
|a_ij - b_ij| <= atol + rtol * max(|a_ij|, mean_j |a_ij|). The scale is the element's own magnitude,
floored by its row's mean magnitude (a value near zero is the sum of terms of the row's size, so it carries
their rounding). A whole-tensor (or whole-row) max would let the massive activations of real Qwen hidden
states (10^3-10^4 in a few channels) hide differences of 4-40 in every ordinary value; the row mean moves
little with a few such channels (one 10^4 channel in 1,536 adds 6.5). For float16 and bfloat16, rtol is one rounding
step (2^-11, 2^-8) at the tensor's largest magnitude, so a stage diverges once the runs differ by more than
one rounding of the dtype they ran in; float32 gets headroom for kernels that sum in another order (eager vs
SDPA differ by ~1e-7 relative). Override with --atol/--rtol.

A serving engine's trace (vLLM) against qdebug's transformers run gets the engine tolerances: its kernels fuse
the residual add into the norm and sum attention in other orders, so float32 gets ONNX Runtime's room
(1e-5 + 1e-4·|a|) and the half types four rounding steps. Measured on the demo in float32 (vLLM 0.32 CPU vs
transformers): max |diff| 9.5e-6 at |a| ~ 20, every stage within the float32 rule itself.
"""

from __future__ import annotations

from dataclasses import dataclass

_BY_DTYPE = {
    "float32": (1e-6, 1e-5),  # float32 rounding is ~6e-8; the rest is headroom for another summation order
    "float16": (1e-4, 2.0**-11),
    "bfloat16": (1e-3, 2.0**-8),
}
_ENGINE_BY_DTYPE = {
    "float32": (1e-5, 1e-4),
    "float16": (1e-3, 2.0**-9),
    "bfloat16": (1e-2, 2.0**-6),
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

    def excess(self, a, b):
        """Per element, |a - b| minus what the rule allows (`rows × dim`, float32): > 0 where they part."""
        x, y = a.float(), b.float()
        mag = x.abs()
        floor = mag.mean(dim=-1, keepdim=True) if x.ndim else mag
        return (x - y).abs() - (self.atol + self.rtol * torch_max(mag, floor))


def torch_max(a, b):
    """Elementwise max with broadcasting."""
    import torch

    return torch.maximum(a, b)


def tolerance_for(dtype_a: str, dtype_b: str, atol: float | None = None, rtol: float | None = None, *, engine: bool = False) -> Tolerance:
    """The tolerance of the less precise of two dtypes (an engine's, when one run is a serving engine's), with user overrides."""
    worst = max((dtype_a, dtype_b), key=lambda d: _RANK.get(d, 0))
    table = _ENGINE_BY_DTYPE if engine else _BY_DTYPE
    a, r = table.get(worst, table["float32"])
    return Tolerance(atol if atol is not None else a, rtol if rtol is not None else r)
