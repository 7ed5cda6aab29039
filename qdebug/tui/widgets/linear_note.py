"""The attention panel on a linear-attention layer: say plainly that there is no attention matrix, and what exists."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from qdebug.render.data_text import data
from qdebug.vocab import layer_stage


def linear_layer(trace, layer: int | None) -> bool:
    """Whether `layer` is a linear-attention layer of a hybrid model (from the trace's `layer_types`)."""
    types = trace.meta.layer_types or []
    return layer is not None and 0 <= layer < len(types) and types[layer] == "linear_attention"


def linear_note(trace, layer: int):
    """What the panel shows instead of a heatmap: the kernel's layout, gate/beta and state norms of the layer."""
    stage = trace.stages.get(layer_stage(layer))
    info = (stage.summary.linear_attention if stage else None) or {}
    lines = [
        Text(f"layer {layer} is a linear-attention layer (gated delta rule): it has no attention matrix, so there is no heatmap.",
             style="bold"),
    ]
    if info:
        lines.append(data(f"kernel {info['kernel']} · q {info['query_shape']} k {info['key_shape']} v {info['value_shape']} "
                          f"(expected [B,T,H,D])"))
        lines.append(Text(f"gate g mean {info['g']['mean']:.3g} [{info['g']['min']:.3g}, {info['g']['max']:.3g}] · "
                          f"beta mean {info['beta']['mean']:.3g} [{info['beta']['min']:.3g}, {info['beta']['max']:.3g}]"))
        if info.get("state_norm_last"):
            lines.append(Text("recurrent state norm per head (last step): " + " ".join(f"{x:.3g}" for x in info["state_norm_last"])))
    lines.append(Text("[/] change layer: full-attention layers have heatmaps", style="dim"))
    return Group(*lines)
