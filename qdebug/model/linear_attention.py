"""Taps on the gated-delta-rule kernel of linear-attention layers (Qwen3.5), like the attention kernel's taps.

The decoder's `Qwen3_5GatedDeltaNet.forward` calls the module-level functions `torch_chunk_gated_delta_rule`
(prefill) and `torch_recurrent_gated_delta_rule` (decode) by global name, so qdebug swaps each for a wrapper once
per process. With no tap active on the calling thread the wrapper calls the original with the same arguments
(bit-identical); taps are per thread, like the attention kernel's.
"""

from __future__ import annotations

import importlib
import sys
import threading
from contextlib import AbstractContextManager

from .thread_taps import ThreadTaps

KERNELS = ("torch_chunk_gated_delta_rule", "torch_recurrent_gated_delta_rule")
_taps = ThreadTaps()
_lock = threading.Lock()
_installed: set[str] = set()


class LinearCall:
    """One gated-delta-rule call: layer, kernel name, q/k/v (`B × T × H × D` expected), gate g and beta (`B × T × H`)."""

    __slots__ = ("layer", "kernel", "query", "key", "value", "g", "beta", "kwargs", "base")

    def __init__(self, layer, kernel, query, key, value, g, beta, kwargs, base):
        self.layer, self.kernel = layer, kernel
        self.query, self.key, self.value, self.g, self.beta, self.kwargs = query, key, value, g, beta, kwargs
        # base(q, k, v, g, beta) runs the bare kernel outside the tap chain (a fault keeping the cache well-formed).
        self.base = base


def install(module_name: str) -> None:
    """Wrap the gated-delta-rule functions of `module_name` (idempotent, thread-safe)."""
    with _lock:
        if module_name in _installed:
            return
        module = importlib.import_module(module_name)
        for name in KERNELS:
            original = getattr(module, name, None)
            if original is not None:
                setattr(module, name, _wrap(name, original))
        _installed.add(module_name)


def linear_tapping(*taps) -> AbstractContextManager[None]:
    """Activate linear-attention taps for calls made by this thread, outermost first."""
    return _taps.pushed(taps)


def _caller_layer() -> int | None:
    # The kernel functions are not given their module; the caller's frame is GatedDeltaNet.forward, whose
    # `self.layer_idx` names the decoder layer (reading a frame is cheaper and safer than a hook per layer).
    frame = sys._getframe(2)
    owner = frame.f_locals.get("self")
    return getattr(owner, "layer_idx", None)


def _wrap(name: str, original):
    kernel = name.removeprefix("torch_")

    def qdebug_gated_delta_rule(query, key, value, g=None, beta=None, **kwargs):
        taps = _taps.active()
        if not taps:
            return original(query, key, value, g=g, beta=beta, **kwargs)
        layer = _caller_layer()

        def run(index: int, q, k, v, g_, b_):
            if index == len(taps):
                return original(q, k, v, g=g_, beta=b_, **kwargs)
            call = LinearCall(layer, kernel, q, k, v, g_, b_, kwargs,
                              lambda q2, k2, v2, g2, b2: original(q2, k2, v2, g=g2, beta=b2, **kwargs))
            return taps[index](call, lambda q2, k2, v2, g2, b2: run(index + 1, q2, k2, v2, g2, b2))

        return run(0, query, key, value, g, beta)

    qdebug_gated_delta_rule.__name__ = f"qdebug_{name}"
    setattr(qdebug_gated_delta_rule, "__wrapped__", original)  # what functools.unwrap and inspect follow back
    return qdebug_gated_delta_rule
