"""Linear-attention taps for `qdebug diff` on hybrid models: the head-first fault and the layout watch."""

from __future__ import annotations

from contextlib import nullcontext


def linear_taps(loaded, head_first: int | None, prompt_len: int):
    """(context factory activating the taps, the watch or None, whether --inject head-first names a linear layer)."""
    adapter = loaded.adapter
    if not hasattr(adapter, "layer_types"):
        return nullcontext, None, False
    from qdebug.analysis.detectors.linear_layout import LinearLayoutWatch
    from qdebug.model.linear_attention import install, linear_tapping
    from qdebug.trace.layout_faults import HeadFirstLinear

    install(adapter.linear_kernel_module())
    types = adapter.layer_types(loaded.config)
    on_linear = head_first is not None and 0 <= head_first < len(types) and types[head_first] == "linear_attention"
    dims = adapter.linear_dims(loaded.config)
    watch = LinearLayoutWatch(dims["key_heads"], dims["value_heads"], dims["key_dim"], dims["value_dim"], prompt_len)
    taps = ([HeadFirstLinear(head_first)] if on_linear else []) + [watch]
    return (lambda: linear_tapping(*taps)), watch, on_linear
