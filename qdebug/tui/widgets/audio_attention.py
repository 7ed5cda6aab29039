"""The attention panel's audio form: the clip's waveform with the selected query's attention strip beneath."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from qdebug.render.data_text import data


def audio_attention_renderable(view, width: int):
    """Strip over the clip's rows for the selected query, layer and head (or why there is none)."""
    from qdebug.analysis.audio_attention import attention_strip, clip_items
    from qdebug.render.audio_strip import strip_panel

    doc, trace = view.doc, view.doc.trace
    info = clip_items(trace)
    index = min(view.sel.image, len(info) - 1)
    pos = view.pos
    layer = "layer mean" if view.sel.layer is None else f"layer {view.sel.layer}"
    head = "head mean" if view.sel.head is None else f"head {view.sel.head}"
    title = data(f"clip {index} ({info[index].rows} rows, {info[index].seconds or 0.0:.2f} s) · {layer} · {head} · query pos {pos} {doc.token_at(pos)!r}",
                 "bold")
    strip = attention_strip(trace, index, queries=[pos], layer=view.sel.layer, head=view.sel.head) if pos in trace.attn_queries else None
    if strip is None or not strip.numel():
        why = "not captured for this query" if pos not in trace.attn_queries else "not captured for this layer"
        return Group(title, Text(f"no attention: {why} (←/→ move between query tokens, [/] change layer)", style="dim"))
    return Group(title, strip_panel(trace, info[index], strip, "attention over time", width=max(16, width - 20)))
