"""Layout faults: attention taps that hand a kernel q/k/v in the wrong axis order (what `qdebug diff --inject` uses).

They only need the model's kernels and taps (`model/attention.py`, `model/linear_attention.py`); the layout watches
in `analysis/detectors/` are what find them.
"""

from __future__ import annotations

from dataclasses import dataclass

from .protocols import AttentionTap, LinearTap


def _layout_blind_kernel(module, query, key, value, attention_mask, scaling: float, **kwargs):
    """A kernel that takes axis 1 as heads and axis 2 as positions, whatever it is given (as FLA-style kernels do).

    Given [B, T, H, D] it attends across heads instead of positions; it applies no mask (the mask is laid out for
    positions). Returns the output in the kernel's usual [B, T', H', D] order, so the caller reshapes it without error.
    """
    import torch

    weights = torch.softmax(torch.matmul(query, key.transpose(2, 3)) * scaling, dim=-1, dtype=torch.float32).to(query.dtype)
    return torch.matmul(weights, value).transpose(1, 2).contiguous(), None


@dataclass
class HeadFirst(AttentionTap):
    """In decoder layer `layer`, hand the kernel q/k/v in [B, T, H, D] where it expects [B, H, T, D].

    Key/value heads are repeated to the query head count first (so the shapes line up); applied at prefill only
    (a decode step has T = 1, where the swap does not change the shapes of q).
    """

    layer: int

    def __call__(self, call, proceed):
        """Swap the axes at prefill in `layer`; run every other call unchanged."""
        if call.layer != self.layer or call.query.shape[2] <= 1:
            return proceed(call.query, call.key, call.value)
        groups = call.query.shape[1] // call.key.shape[1]
        key = call.key.repeat_interleave(groups, dim=1)
        value = call.value.repeat_interleave(groups, dim=1)
        return proceed(call.query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), kern=_layout_blind_kernel)


@dataclass
class HeadFirstLinear(LinearTap):
    """In linear-attention layer `layer`, hand the gated-delta-rule kernel [B, H, T, D] where it expects [B, T, H, D].

    The incident's bug (seed 001): q/k/v and g/beta arrive head-first, so the kernel runs its recurrence across
    heads instead of tokens and the layer's output is garbage. Applied at prefill (at a decode step T = 1). The
    recurrent state the cache keeps comes from a correct call outside the tap chain, so later steps can still run
    (a head-first state has the wrong shape for the cache); the tokens still go wrong from the prefill output on.
    With fewer key than value heads (the published Qwen3.5 geometry) the kernel may refuse the head-first shapes
    outright, as it would under the real bug: then the layer's kernel output is zeros (the request gets no answer
    from it), so the run goes on and the diff shows where it parts; the layout watch names the kernel's error.
    A `LinearTap`.
    """

    layer: int

    def __call__(self, call, proceed):
        """Swap the axes at prefill in `layer`; run every other call unchanged."""
        if call.layer != self.layer or call.query.shape[1] <= 1:
            return proceed(call.query, call.key, call.value, call.g, call.beta)
        swap = [t.transpose(1, 2).contiguous() for t in (call.query, call.key, call.value, call.g, call.beta)]
        _, state = call.base(call.query, call.key, call.value, call.g, call.beta)
        try:
            out, _ = proceed(*swap)
        except RuntimeError:  # the kernel's shape checks (e.g. "size of tensor a (64) must match … (66)")
            import torch

            return torch.zeros_like(call.value), state
        return out.reshape(call.value.shape), state
