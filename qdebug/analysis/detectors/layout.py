"""Layout detector: watch q/k/v entering the attention kernel of every decoder layer and check their axes.

The kernel expects [B, H, T, D] for queries and [B, H_kv, T_k, D] for keys/values. The detector knows H, H_kv
and D from the config and T from the request (prompt length at prefill, 1 per decode step), so it does not
rely on the `seq_len < num_heads` heuristic; when T equals the head count the two layouts have the same shape
and it says the layout is ambiguous instead of guessing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from qdebug.findings import Finding
from qdebug.trace.protocols import AttentionTap
from qdebug.vocab import FindingKind, Severity, layer_stage


@dataclass
class StepWatch:
    """What every layout watch keeps (keyword fields, after each watch's own): its findings, the kernel calls seen per
    layer (0 is the prefill, then one per decode step) and what it already flagged."""

    findings: list[Finding] = field(default_factory=list, kw_only=True)
    _calls: dict[int, int] = field(default_factory=dict, kw_only=True)
    _flagged: set = field(default_factory=set, kw_only=True)

    def next_step(self, layer: int) -> int:
        """The step of this call of `layer`'s kernel (0 the prefill), counted."""
        step = self._calls.get(layer, 0)
        self._calls[layer] = step + 1
        return step


@dataclass
class LayoutWatch(StepWatch, AttentionTap):
    """An attention tap that records layout findings; put it after any fault so it sees what the kernel sees."""

    num_heads: int
    num_kv_heads: int
    head_dim: int
    prompt_len: int

    def __call__(self, call, proceed):
        step = self.next_step(call.layer)
        q_len = self.prompt_len if step == 0 else 1
        k_len = self.prompt_len + step
        self._check(call.layer, step, "query", tuple(call.query.shape), self.num_heads, q_len)
        self._check(call.layer, step, "key", tuple(call.key.shape), self.num_kv_heads, k_len)
        self._check(call.layer, step, "value", tuple(call.value.shape), self.num_kv_heads, k_len)
        return proceed(call.query, call.key, call.value)

    def _check(self, layer: int, step: int, name: str, shape: tuple, heads: int, seq: int) -> None:
        key = (layer, name, "ambiguous" if heads == seq else "bad")
        if len(shape) != 4 or key in self._flagged:
            return
        b, d = shape[0], self.head_dim
        expected = (b, heads, seq, d)
        when = "prefill" if step == 0 else f"decode step {step}"
        if heads == seq:
            if shape == expected:
                self._flagged.add(key)
                self.findings.append(Finding(
                    kind=FindingKind.LAYOUT_AMBIGUOUS, severity=Severity.INFO, stage=layer_stage(layer), layer=layer,
                    message=f"layer {layer} {name} ({when}): seq_len == num_heads == {heads}, so [B,H,T,D] and [B,T,H,D] have the same shape; layout cannot be told from shape",
                ))
            return
        if shape == expected:
            return
        self._flagged.add(key)
        swapped_heads = next((h for h in (heads, self.num_heads) if shape == (b, seq, h, d)), None)
        if swapped_heads is not None:
            self.findings.append(Finding(
                kind=FindingKind.LAYOUT, severity=Severity.ERROR, stage=layer_stage(layer), layer=layer,
                message=f"layer {layer} {name} ({when}): head and sequence axes swapped: expected [B,H,T,D] = {list(expected)}, got [B,T,H,D] = {list(shape)}",
            ))
        else:
            self.findings.append(Finding(
                kind=FindingKind.LAYOUT, severity=Severity.ERROR, stage=layer_stage(layer), layer=layer,
                message=f"layer {layer} {name} ({when}): unexpected shape {list(shape)}; expected [B,H,T,D] = {list(expected)}",
            ))
