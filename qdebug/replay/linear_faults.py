"""Faults on linear-attention kernels (Qwen3.5's gated delta rule), applied through qdebug's linear taps."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class HeadFirstLinear:
    """In linear-attention layer `layer`, hand the gated-delta-rule kernel [B, H, T, D] where it expects [B, T, H, D].

    The incident's bug (seed 001): q/k/v and g/beta arrive head-first, so the kernel runs its recurrence across
    heads instead of tokens and the layer's output is garbage. Applied at prefill (at a decode step T = 1). The
    recurrent state the cache keeps comes from a correct call outside the tap chain, so later steps can still run
    (a head-first state has the wrong shape for the cache); the tokens still go wrong from the prefill output on.
    """

    layer: int

    def __call__(self, call, proceed):
        if call.layer != self.layer or call.query.shape[1] <= 1:
            return proceed(call.query, call.key, call.value, call.g, call.beta)
        swap = [t.transpose(1, 2).contiguous() for t in (call.query, call.key, call.value, call.g, call.beta)]
        out, _ = proceed(*swap)
        _, state = call.base(call.query, call.key, call.value, call.g, call.beta)
        return out.reshape(call.value.shape), state
