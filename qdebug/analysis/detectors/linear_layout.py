"""Layout detector for linear-attention kernels (the gated delta rule of Qwen3.5's `linear_attn` layers).

The kernel expects q/k as [B, T, H_k, D_k], v as [B, T, H_v, D_v] and g/beta as [B, T, H_v]: sequence before
heads, the opposite of softmax attention. The watch knows H and D from the config and T from the request
(prompt length at prefill, 1 per decode step), and names the layer, the kernel and the layout it was handed.
"""

from __future__ import annotations

from dataclasses import dataclass

from qdebug.findings import Finding
from qdebug.trace.protocols import LinearTap
from qdebug.vocab import FindingKind, Severity, layer_stage

from .layout import StepWatch


@dataclass
class LinearLayoutWatch(StepWatch, LinearTap):
    """A linear-attention tap recording layout findings; put it after any fault so it sees what the kernel sees."""

    key_heads: int
    value_heads: int
    key_dim: int
    value_dim: int
    prompt_len: int

    def __call__(self, call, proceed):
        step = self.next_step(call.layer)
        seq = self.prompt_len if step == 0 else 1
        flagged = len(self.findings)
        for name, heads, dim in (("query", self.key_heads, self.key_dim), ("key", self.key_heads, self.key_dim),
                                 ("value", self.value_heads, self.value_dim)):
            self._check(call, step, name, tuple(getattr(call, name).shape), heads, seq, dim)
        try:
            return proceed(call.query, call.key, call.value, call.g, call.beta)
        except RuntimeError as exc:
            if len(self.findings) > flagged:  # the layout just named made the kernel fail: say so beside it
                self.findings.append(Finding(
                    kind=FindingKind.LAYOUT, severity=Severity.ERROR, stage=layer_stage(call.layer), layer=call.layer,
                    message=f"{layer_stage(call.layer)} linear attention, kernel {call.kernel} raised on that layout "
                            f"({type(exc).__name__}: {' '.join(str(exc).split())[:200]}); the layer has no output from it",
                ))
            raise

    def _check(self, call, step: int, name: str, shape: tuple, heads: int, seq: int, dim: int) -> None:
        layer = call.layer
        key = (layer, name)
        if len(shape) != 4 or key in self._flagged or heads == seq:  # T == H: both layouts have one shape
            return
        b = shape[0]
        expected = (b, seq, heads, dim)
        if shape == expected:
            return
        self._flagged.add(key)
        when = "prefill" if step == 0 else f"decode step {step}"
        head_first = shape == (b, heads, seq, dim)
        what = (f"head-first [B,H,T,D] = {list(shape)} where the kernel expects [B,T,H,D] = {list(expected)}" if head_first
                else f"unexpected shape {list(shape)}; expected [B,T,H,D] = {list(expected)}")
        self.findings.append(Finding(
            kind=FindingKind.LAYOUT, severity=Severity.ERROR, stage=layer_stage(layer), layer=layer,
            message=f"{layer_stage(layer)} linear attention, kernel {call.kernel}, {name} ({when}): {what}",
        ))
