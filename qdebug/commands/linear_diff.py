"""Linear-attention taps for `qdebug diff` on hybrid models: the layout watch, beside any fault's linear taps."""

from __future__ import annotations

from contextlib import nullcontext


def linear_taps(loaded, faults: tuple, prompt_len: int):
    """(context factory activating `faults` and the watch, the watch or None); `faults` are an --inject's linear taps."""
    adapter = loaded.adapter
    if adapter.layer_types(loaded.config) is None:
        return nullcontext, None
    from qdebug.analysis.detectors.linear_layout import LinearLayoutWatch
    from qdebug.model.linear_attention import install, linear_tapping

    install(adapter.linear_kernel_module())
    dims = adapter.linear_dims(loaded.config)
    watch = LinearLayoutWatch(dims["key_heads"], dims["value_heads"], dims["key_dim"], dims["value_dim"], prompt_len)
    taps = [*faults, watch]
    return (lambda: linear_tapping(*taps)), watch
