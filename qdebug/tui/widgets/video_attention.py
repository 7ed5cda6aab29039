"""The attention panel of a video trace: the selected query's attention over each temporal slice, side by side, with
the peak as (time s, row, col), as the CLI's video panel and PNG strip draw it for the generated tokens."""

from __future__ import annotations

from rich.columns import Columns
from rich.table import Table
from rich.console import Group
from rich.text import Text

from qdebug.render.data_text import data

from ..state import View


def video_attention_renderable(view: View, width: int, height: int, plain: bool = False, choice: str = ""):
    """Per-slice heatmaps of the selection's query over one video, or a line saying why there is nothing to draw."""
    from qdebug.analysis.attention import attention_grid
    from qdebug.analysis.video_attention import video_peak
    from qdebug.render.heatmap import heatmap, legend

    doc = view.doc
    if doc is None:
        return Text("attention: no request yet", style="dim")
    trace = doc.trace
    index = min(view.sel.image, len(trace.images) - 1)
    img = trace.images[index]
    pos = view.pos_on(doc)
    t = img.grid_thw[0]
    head = data(f"video {index} ({t} slices of {img.rows}×{img.cols} patches) · {choice} · query pos {pos} {doc.token_at(pos)!r}", "bold")
    step = doc.step_chosen_at(pos)
    if step is not None:
        head.append(data(f" → step {step} {trace.steps[step].token!r}", "green"))
    grids = attention_grid(trace, index, queries=[pos], layer=view.sel.layer, head=view.sel.head, per_slice=True) \
        if pos in trace.attn_queries else None
    if grids is None:
        why = "not captured for this query" if pos not in trace.attn_queries else "not captured for this layer yet"
        return Group(head, Text(f"no attention: {why} (←/→ move between query tokens, [/] change layer)", style="dim"))
    peak = video_peak(trace, index, grids=grids)
    # every slice on one row, each as large as the panel's width and height allow (title, slice label, legend)
    cell = max(1, min((width - 2 * t) // max(1, t * img.cols), (2 * max(3, height - 4 - (2 if plain else 0))) // max(1, img.rows), 8))
    size = cell * max(img.rows, img.cols)
    pictures = []
    for k in range(grids.shape[0]):
        marker = (peak.row, peak.col) if peak is not None and peak.slice == k else None
        when = f" t={peak_time(trace, index, k):.2f} s" if peak_time(trace, index, k) is not None else ""
        pictures.append(Group(Text(f"slice {k}{when}", style="dim"), heatmap(grids[k], width=size, marker=marker, plain=plain)))
    words = f"peak {peak.label()} (slice {peak.slice})" if peak is not None else "peak: none"
    bar = Table.grid(padding=(0, 3))
    bar.add_row(legend(float(grids.min()), float(grids.max()), width=16, plain=plain), data(words, "bold"))
    return Group(head, Columns(pictures, padding=(0, 2)), bar)


def peak_time(trace, video: int, k: int) -> float | None:
    """Slice k's time in seconds, from the preprocess stage (None when the trace does not say)."""
    from qdebug.analysis.video_attention import video_preps

    preps = video_preps(trace)
    times = preps[video].slice_times if video < len(preps) else None
    return float(times[k]) if times and k < len(times) else None
