"""What the attention panel draws differently per modality, in one table: an image's heatmap beside its thumbnail, a
video's heatmap per temporal slice, an audio clip's strip under its waveform."""

from __future__ import annotations

from typing import Callable

from rich.columns import Columns
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from qdebug.render.data_text import data

from ..images import missing_image_note, pil_image
from ..state import Selection, TraceDoc, View


def _choice(trace, sel: Selection) -> str:
    """The selection's layer and head as the panel's title names them: `layer 1/4 · head mean`."""
    layer = "layer mean" if sel.layer is None else f"layer {sel.layer}/{trace.meta.num_layers}"
    head = "head mean" if sel.head is None else f"head {sel.head}/{trace.meta.num_heads}"
    return f"{layer} · {head}"


def _scale(rows: int, cols: int, width: int, height: int) -> int:
    """Pixels per cell so one picture fits `width` columns and `height` lines (two pixel rows a line)."""
    by_width = width // max(1, cols)
    by_height = (2 * height) // max(1, rows)
    return max(1, min(by_width, by_height, 8))


def why_no_attention(doc: TraceDoc, pos: int, sel: Selection) -> str:
    """Precisely what is missing when query `pos` of `doc` has no attention to draw: the query, the layer, or its rows."""
    from qdebug.trace.tensor_names import TensorKind as T

    trace = doc.trace
    if pos not in trace.attn_queries:
        kept = ", ".join(map(str, trace.attn_queries[:8])) + (" …" if len(trace.attn_queries) > 8 else "")
        return f"query pos {pos} is not one whose attention rows are kept ({kept or 'none'})"
    layers = range(trace.meta.num_layers or trace.num_layers) if sel.layer is None else [sel.layer]
    held = [l for l in layers if trace.has_tensor(T.LAYER_ATTN, layer=l)]
    if not held:
        if not doc.complete:
            return "no layer has run yet" if sel.layer is None else f"layer {sel.layer} has not run yet"
        return "no layer kept attention weights" if sel.layer is None else f"layer {sel.layer} kept no attention weights"
    rows = trace.tensor(T.LAYER_ATTN, layer=held[0]).shape[1]
    return f"layer {held[0]} kept {rows} attention row(s), the trace lists {len(trace.attn_queries)} queries"


def image_form(view: View, width: int, height: int, plain: bool = False, thumbnail: bool = True):
    """An image's heatmap, its thumbnail (unless `thumbnail` is False: drawn in pixels beside the panel) and legend for
    the selection, or a line saying why there is nothing to draw."""
    from qdebug.analysis.attention import attention_grid, peak_of
    from qdebug.render.heatmap import heatmap, legend

    from .attention_thumbnail import thumbnail as draw_thumbnail

    doc = view.doc
    assert doc is not None  # attention_renderable answered a view without a request
    trace = doc.trace
    index = min(view.sel.image, len(trace.images) - 1)
    img = trace.images[index]
    pos = view.pos_on(doc)
    head = data(f"image {index} ({img.rows}×{img.cols} patches) · {_choice(trace, view.sel)} · query pos {pos} {doc.token_at(pos)!r}", "bold")
    step = doc.step_chosen_at(pos)
    if step is not None:
        head.append(data(f" → step {step} {trace.steps[step].token!r}", "green"))
    grid = None
    if pos in trace.attn_queries:
        grid = attention_grid(trace, index, queries=[pos], layer=view.sel.layer, head=view.sel.head)
    if grid is None and trace.meta.engine and not trace.attn_queries:  # a serving engine's trace: there are none to show
        name = trace.meta.engine.get("name", "the engine")
        return Group(head, data(f"no attention: an engine trace ({name} exposes no attention weights); "
                                "`qdebug attn … --save` records them for the same request", "dim"))
    if grid is None:
        return Group(head, data(f"no attention: {why_no_attention(doc, pos, view.sel)} (←/→ move between query tokens, [/] change layer)", "dim"))
    frame = 2 if plain else 0  # the ramp is framed (its blank low end must not hide the grid)
    s = _scale(img.rows, img.cols, max(8, (width - 4) // 2), max(3, height - 3 - frame))  # title, legend, note
    size = s * max(img.rows, img.cols)
    peak = peak_of(grid, index)
    pictures = Table.grid(padding=(0, 3))
    pictures.add_column()
    pictures.add_column()
    cells = [heatmap(grid, width=size, marker=(peak.row, peak.col), plain=plain)]
    if thumbnail:
        cells.append(draw_thumbnail(doc, index, img, size, s, plain))
    pictures.add_row(*cells)
    bar = Table.grid(padding=(0, 3))
    bar.add_row(legend(float(grid.min()), float(grid.max()), width=min(24, max(8, size - 10)), plain=plain),
                Text(f"peak row {peak.row:d}, col {peak.col:d}", style="bold"))
    parts: list[RenderableType] = [head, pictures, bar]
    if thumbnail and pil_image(doc, index) is None:  # say where it looked: the user can put the file there
        parts.append(data(missing_image_note(doc, index), "yellow"))
    if trace.meta.attn_capture:
        parts.append(data(trace.meta.attn_capture, "dim"))
    return Group(*parts)


def video_form(view: View, width: int, height: int, plain: bool = False, thumbnail: bool = True):
    """Per-slice heatmaps of the selection's query over one video (every slice on one row, the peak as (time s, row, col),
    as the CLI's video panel and PNG strip draw it), or a line saying why there is nothing to draw."""
    from qdebug.analysis.item_attention import slice_grids, video_peak
    from qdebug.render.heatmap import heatmap, legend

    doc = view.doc
    assert doc is not None  # attention_renderable answered a view without a request
    trace = doc.trace
    choice = _choice(trace, view.sel)
    index = min(view.sel.image, len(trace.images) - 1)
    img = trace.images[index]
    pos = view.pos_on(doc)
    t = img.grid_thw[0]
    head = data(f"video {index} ({t} slices of {img.rows}×{img.cols} patches) · {choice} · query pos {pos} {doc.token_at(pos)!r}", "bold")
    step = doc.step_chosen_at(pos)
    if step is not None:
        head.append(data(f" → step {step} {trace.steps[step].token!r}", "green"))
    grids = slice_grids(trace, index, queries=[pos], layer=view.sel.layer, head=view.sel.head) if pos in trace.attn_queries else None
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
    from qdebug.analysis.item_attention import video_preps

    preps = video_preps(trace)
    times = preps[video].slice_times if video < len(preps) else None
    return float(times[k]) if times and k < len(times) else None


def audio_form(view: View, width: int, height: int, plain: bool = False, thumbnail: bool = True):
    """The clip's waveform with the selected query's attention strip beneath, for its layer and head (or why there is none)."""
    from qdebug.analysis.item_attention import attention_strip, clip_items
    from qdebug.render.audio_strip import strip_panel

    doc = view.doc
    assert doc is not None  # attention_renderable answered a view without a request
    trace = doc.trace
    info = clip_items(trace)
    index = min(view.sel.image, len(info) - 1)
    pos = view.pos_on(doc)
    layer = "layer mean" if view.sel.layer is None else f"layer {view.sel.layer}"
    head = "head mean" if view.sel.head is None else f"head {view.sel.head}"
    title = data(f"clip {index} ({info[index].rows} rows, {info[index].seconds or 0.0:.2f} s) · {layer} · {head} · query pos {pos} {doc.token_at(pos)!r}",
                 "bold")
    strip = attention_strip(trace, index, queries=[pos], layer=view.sel.layer, head=view.sel.head) if pos in trace.attn_queries else None
    if strip is None or not strip.numel():
        why = "not captured for this query" if pos not in trace.attn_queries else "not captured for this layer"
        return Group(title, Text(f"no attention: {why} (←/→ move between query tokens, [/] change layer)", style="dim"))
    return Group(title, strip_panel(trace, info[index], strip, "attention over time", width=max(16, width - 20)))


# each modality's form, as `drawn_as` names the request's: (view, width, height, plain, thumbnail) → a renderable
FORMS: dict[str, Callable[..., RenderableType]] = {"image": image_form, "video": video_form, "audio": audio_form}
