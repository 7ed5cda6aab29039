"""qdebug's attention kernel: the model's own kernel, with thread-local taps that can watch or alter it.

Registered with transformers' `AttentionInterface` (and the matching mask function, without which the
decoder silently gets no causal mask). With no tap active it calls the base kernel (eager or SDPA)
unchanged, so an untapped forward is bit-identical to the base kernel. Taps are per thread, so
concurrent requests on one shared model each see only their own taps.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager

from .thread_taps import ThreadTaps

_taps = ThreadTaps()
_registered: set[str] = set()
_lock = threading.Lock()

# A tap is called as tap(call, proceed) where `call` describes the attention call and
# proceed(query, key, value, need_weights=False, kernel=None) -> (output, weights) runs the rest of the
# chain; `kernel(module, q, k, v, mask, **kwargs)` replaces the base kernel (fault injection).
Tap = Callable[["AttentionCall", Callable], tuple]


class AttentionCall:
    """One decoder attention call: the module, its layer, and the q/k/v it received (`B × H × T × D`)."""

    __slots__ = ("module", "layer", "query", "key", "value", "mask", "kwargs")

    def __init__(self, module, layer, query, key, value, mask, kwargs):
        self.module, self.layer = module, layer
        self.query, self.key, self.value, self.mask, self.kwargs = query, key, value, mask, kwargs


def kernel_name(base: str) -> str:
    """The attention-implementation name under which qdebug's kernel wraps `base`."""
    return f"qdebug_{base}"


def register(base: str) -> str:
    """Register qdebug's kernel (and the base kernel's mask function) for `base`; returns its name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    name = kernel_name(base)
    with _lock:
        if name not in _registered:
            AttentionInterface.register(name, _make_kernel(base))
            AttentionMaskInterface.register(name, ALL_MASK_ATTENTION_FUNCTIONS[base])
            _registered.add(name)
    return name


def tapping(*taps: Tap) -> AbstractContextManager[None]:
    """Activate taps for attention calls made by this thread, innermost last."""
    return _taps.pushed(taps)


def _base_function(module, base: str):
    """The base kernel: the architecture's own eager function, or transformers' SDPA."""
    if base == "sdpa":
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward
    return sys.modules[type(module).__module__].eager_attention_forward


def eager_with_weights(module, query, key, value, mask, **kwargs):
    """Eager attention returning weights, whatever mask form the base kernel's mask function made."""
    import torch

    eager = sys.modules[type(module).__module__].eager_attention_forward
    if mask is not None and mask.dtype == torch.bool:
        mask = torch.zeros(mask.shape, dtype=query.dtype, device=query.device).masked_fill(
            ~mask, torch.finfo(query.dtype).min
        )
    elif mask is None and getattr(module, "is_causal", False) and query.shape[2] > 1:
        q_len, k_len = query.shape[2], key.shape[2]
        allowed = torch.ones(q_len, k_len, dtype=torch.bool, device=query.device).tril(k_len - q_len)
        mask = torch.zeros(q_len, k_len, dtype=query.dtype, device=query.device).masked_fill(
            ~allowed, torch.finfo(query.dtype).min
        )[None, None]
    elif mask is not None:
        mask = mask[:, :, :, : key.shape[-2]]
    kwargs.pop("is_causal", None)
    return eager(module, query, key, value, mask, **kwargs)


def weights_for_rows(module, query, key, value, mask, rows: list[int], **kwargs):
    """Attention weights `B × H × len(rows) × K` of the given query rows only, by the architecture's eager formula.

    The layer's output still comes from its own kernel; this side computation costs `rows × K` per head
    instead of eager's `T × T`. `mask` is whatever the base kernel's mask function made (bool, additive or
    None for a causal kernel).
    """
    import torch

    from .device_index import index_on, select_positions

    eager = sys.modules[type(module).__module__].eager_attention_forward
    q_len, k_len = query.shape[2], key.shape[2]
    q = select_positions(query, 2, rows)  # no host→device copy per call (it would make the CPU wait for the GPU)
    if mask is not None:
        mask = mask[:, :, :, :k_len].to(query.device)
        if mask.shape[2] == q_len and q_len > 1:
            mask = select_positions(mask, 2, rows)
        if mask.dtype == torch.bool:
            mask = torch.zeros(mask.shape, dtype=query.dtype, device=query.device).masked_fill(~mask, torch.finfo(query.dtype).min)
    elif getattr(module, "is_causal", False) and q_len > 1:
        index = index_on(tuple(rows), query.device)
        allowed = torch.arange(k_len, device=query.device)[None, :] <= index[:, None] + (k_len - q_len)
        mask = torch.zeros(allowed.shape, dtype=query.dtype, device=query.device).masked_fill(~allowed, torch.finfo(query.dtype).min)[None, None]
    kwargs = {k: v for k, v in kwargs.items() if k != "is_causal"}
    _, weights = eager(module, q, key, value, mask, **kwargs)
    return weights


def _make_kernel(base: str):
    def qdebug_attention(module, query, key, value, attention_mask, **kwargs):
        base_fn = _base_function(module, base)
        taps = _taps.active()
        layer = getattr(module, "layer_idx", None)
        if not taps or layer is None:  # the vision tower (no layer_idx) always passes through untouched
            return base_fn(module, query, key, value, attention_mask, **kwargs)
        call = AttentionCall(module, layer, query, key, value, attention_mask, kwargs)

        def run(index: int, q, k, v, need_weights: bool, kernel):
            if index == len(taps):
                if kernel is not None:
                    return kernel(module, q, k, v, attention_mask, **kwargs)
                if need_weights and base != "eager":
                    return eager_with_weights(module, q, k, v, attention_mask, **kwargs)
                return base_fn(module, q, k, v, attention_mask, **kwargs)
            inner = AttentionCall(module, layer, q, k, v, attention_mask, kwargs)
            return taps[index](
                inner,
                lambda q2, k2, v2, nw=False, kern=None: run(index + 1, q2, k2, v2, need_weights or nw, kern or kernel),
            )

        return run(0, call.query, call.key, call.value, False, None)

    qdebug_attention.__name__ = f"qdebug_{base}_attention"
    return qdebug_attention
