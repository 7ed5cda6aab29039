"""AttentionView: the selection's attention drawn in its request's modality's form, and the image overlay beside it."""

from __future__ import annotations

from rich.text import Text

from ..images import pil_image
from ..state import View
from .view_panel import ViewPanel


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


def attention_renderable(view: View, width: int, height: int, plain: bool = False, thumbnail: bool = True):
    """The selection's attention in its modality's form (attention_forms.FORMS), or a line saying why there is nothing to draw.

    `plain`: no colour on this terminal (NO_COLOR), so the pictures are character ramps. `thumbnail`: False when
    the image is shown in pixels beside the panel."""
    doc = view.doc
    if doc is None:  # before the imports below: a live screen's first frame has no request yet
        return Text("attention: no request yet", style="dim")
    from qdebug.analysis.item_attention import drawn_as

    from .attention_forms import FORMS
    from .linear_note import linear_layer, linear_note

    trace = doc.trace
    layer = view.sel.layer
    if layer is not None and linear_layer(trace, layer):
        return linear_note(trace, layer)
    kind = drawn_as(trace)
    if kind is None:
        return Text("attention: this request has no image", style="dim")
    return FORMS[kind](view, width, height, plain, thumbnail)


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
