"""AttentionView: the image's merged-patch grid as a half-block heatmap, the image beside it, and a legend."""

from __future__ import annotations

from pathlib import Path

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from qdebug.render.data_text import data

from ..images import missing_image_note, pil_image
from ..state import Selection, TraceDoc, View
from .view_panel import ViewPanel


def _choice(trace, sel: Selection) -> str:
    layer = "layer mean" if sel.layer is None else f"layer {sel.layer}/{trace.meta.num_layers}"
    head = "head mean" if sel.head is None else f"head {sel.head}/{trace.meta.num_heads}"
    return f"{layer} · {head}"


def _scale(rows: int, cols: int, width: int, height: int) -> int:
    """Pixels per cell so one picture fits `width` columns and `height` lines (two pixel rows a line)."""
    by_width = width // max(1, cols)
    by_height = (2 * height) // max(1, rows)
    return max(1, min(by_width, by_height, 8))


def _placeholder(img, s: int, name: str):
    """A dim box the thumbnail's size, saying that the image file `name` is not available."""
    from rich.panel import Panel

    note = Text("image not available\n", style="dim", justify="center")
    note.append(data(name, "dim"))  # a trace's file name: data
    return Panel(note, width=max(14, img.cols * s), height=max(3, (img.rows * s + 1) // 2), border_style="dim")


_thumbs: dict = {}


def _thumbnail(doc, index: int, img, size: int, s: int, plain: bool = False):
    """The image as half blocks (a ramp when `plain`) at the heatmap's size (cached: it does not change with
    layer, head or query)."""
    from qdebug.render.heatmap import image_ramp, image_text

    key = (doc, index, size, plain)
    if key not in _thumbs:
        if len(_thumbs) > 32:
            _thumbs.clear()
        pil = pil_image(doc, index)
        draw = image_ramp if plain else image_text
        _thumbs[key] = draw(pil, img.rows, img.cols, width=size) if pil is not None else _placeholder(img, s, Path(img.path).name)
    return _thumbs[key]


def overlay_for(view: View):
    """The image with the selection's attention laid over it (PIL), or None when there is nothing to draw."""
    from qdebug.analysis.attention import attention_grid, peak_of
    from qdebug.render.overlay import overlay_image

    doc = view.doc
    if doc is None or not doc.trace.images or view.pos_on(doc) not in doc.trace.attn_queries:
        return None
    index = min(view.sel.image, len(doc.trace.images) - 1)
    grid = attention_grid(doc.trace, index, queries=[view.pos_on(doc)], layer=view.sel.layer, head=view.sel.head)
    pil = pil_image(doc, index)
    if grid is None or pil is None:
        return None
    peak = peak_of(grid, index)
    return overlay_image(pil, grid, peak=(peak.row, peak.col))


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


def attention_renderable(view: View, width: int, height: int, plain: bool = False, thumbnail: bool = True):
    """Heatmap, thumbnail and legend for the selection, or a line saying why there is nothing to draw.

    `plain`: no colour on this terminal (NO_COLOR), so the pictures are character ramps. `thumbnail`: False when
    the image is shown in pixels beside the panel."""
    doc = view.doc
    if doc is None:  # before the imports below: a live screen's first frame has no request yet
        return Text("attention: no request yet", style="dim")
    from qdebug.analysis.attention import attention_grid, peak_of
    from qdebug.render.heatmap import heatmap, legend

    trace = doc.trace
    from .linear_note import linear_layer, linear_note

    layer = view.sel.layer
    if layer is not None and linear_layer(trace, layer):
        return linear_note(trace, layer)
    from qdebug.analysis.audio_attention import clip_items
    from qdebug.render.media_words import is_video

    if not trace.images and clip_items(trace):
        from .audio_attention import audio_attention_renderable

        return audio_attention_renderable(view, width)
    if not trace.images:
        return Text("attention: this request has no image", style="dim")
    if is_video(trace):  # a video: one heatmap per temporal slice
        from .video_attention import video_attention_renderable

        return video_attention_renderable(view, width, height, plain, _choice(trace, view.sel))
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
        cells.append(_thumbnail(doc, index, img, size, s, plain))
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


class AttentionView(ViewPanel):
    """The attention heatmap panel; set `view` to redraw (cached per selection and size)."""

    def view_key(self, view: View) -> tuple:
        """The document, layer, head, image and query."""
        return (view.doc, view.sel.layer, view.sel.head, view.sel.image, view.pos)

    PRERENDER = True
    pixels = False  # the image is drawn in pixels beside this panel (Sixel / Kitty), not as half blocks here

    def renderable(self, view: View):
        """The heatmap for `view` at the widget's size."""
        return attention_renderable(view, self.size.width, self.size.height, plain=self.app.no_color, thumbnail=not self.pixels)
