"""Attention over an image's merged-patch grid, from a Trace (no live model)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from qdebug.trace.items import trace_items
from qdebug.trace.tensor_names import TensorKind as T

PeakModality = Literal["image", "video", "audio"]


@dataclass(frozen=True, kw_only=True)
class Peak:
    """The hottest place of one media item's attention, for every modality.

    `image`: a cell of `trace.images[index]`'s grid; `video`: a cell of one temporal slice (`slice`) of video `index`,
    `seconds` the slice's time, or (`slice` None) of its grid averaged over its slices; `audio`: a row of clip `index`'s
    strip (no `col`), `seconds` the row's start time in the clip."""

    modality: PeakModality
    index: int  # the item: among trace.images (image, video) or the audio clips
    row: int
    rows: int
    value: float
    col: int = 0
    cols: int = 1
    slice: int | None = None  # video: the temporal slice holding the peak
    seconds: float | None = None  # video: the slice's time (NaN if unknown); audio: the row's start time

    def to_json(self) -> dict:
        """As {image, row, col, rows, cols} (a video's averaged over its slices too: the keys `steps[].attention_peak` has
        always had); a video slice's {video, slice, time_s, row, col, rows, cols}; a clip's {clip, row, rows, seconds, value}."""
        return _FORMS[self.form()][0](self)

    def form(self) -> str:
        """How it is written: "cell" (an image's, a video's averaged), "slice" (a video slice's), "row" (a clip's)."""
        return _FORM_OF[self.modality][self.slice is not None]

    def time(self) -> float:
        """`seconds`, NaN when the peak has none (an image's)."""
        return float("nan") if self.seconds is None else self.seconds

    def label(self) -> str:
        """The words the reports and PNGs print: `row 2, col 3`; a video's `t=1.25 s, row 2, col 3`; a clip's
        `0.84 s (row 21 of 25)`."""
        return _FORMS[self.form()][1](self)


# what differs by modality in a peak: its form (by modality: without a slice, with one), and each form's JSON and words
_FORM_OF = {"image": ("cell", "cell"), "video": ("cell", "slice"), "audio": ("row", "row")}
_FORMS = {
    "cell": (lambda p: {"image": p.index, "row": p.row, "col": p.col, "rows": p.rows, "cols": p.cols},
             lambda p: f"row {p.row}, col {p.col}"),
    "slice": (lambda p: {"video": p.index, "slice": p.slice, "time_s": p.time(), "row": p.row, "col": p.col, "rows": p.rows, "cols": p.cols},
              lambda p: f"t={p.time():.2f} s, row {p.row}, col {p.col}"),
    "row": (lambda p: {"clip": p.index, "row": p.row, "rows": p.rows, "seconds": round(p.time(), 3), "value": p.value},
            lambda p: f"{p.time():.2f} s (row {p.row} of {p.rows})"),
}


def attention_layers(trace) -> list[int]:
    """Layers whose attention rows were captured."""
    return trace.tensor_layers(T.LAYER_ATTN)


def step_query(trace, step: int) -> int:
    """Sequence position of the query token whose output chose generation step `step`."""
    return len(trace.input_ids) - 1 + step


def held_layers(trace, layer: int | None) -> list[int]:
    """The layers to average (all captured unless `layer`) that hold attention rows."""
    return [l for l in (attention_layers(trace) if layer is None else [layer]) if trace.has_tensor(T.LAYER_ATTN, layer=l)]


def query_rows(trace, queries: list[int] | None) -> list[int]:
    """The attention rows of the given query positions that were kept (default: the queries that chose each generated token)."""
    if queries is None:
        queries = [step_query(trace, k) for k in range(len(trace.steps))]
    index = {p: i for i, p in enumerate(trace.attn_queries)}
    return [index[q] for q in queries if q in index]


def attention_grid(trace, image: int = 0, *, queries: list[int] | None = None, layer: int | None = None, head: int | None = None,
                   per_slice: bool = False):
    """`rows × cols` attention from the given query positions to one image's merged patches.

    Averaged over `queries` (default: the queries that chose each generated token), over layers unless
    `layer` is given, and over heads unless `head` is given, and over a video's temporal slices unless
    `per_slice` (then `t × rows × cols`). Returns a float32 tensor, or None if nothing was captured for that choice.
    """
    import torch

    img = trace.images[image]
    layers = held_layers(trace, layer)
    if not layers:
        return None
    rows = query_rows(trace, queries)
    if not rows:
        return None
    offset = sum(im.tokens for im in trace.images[:image])
    stack = []
    for l in layers:
        a = trace.tensor(T.LAYER_ATTN, layer=l)  # H × q × image keys
        if a.shape[1] != len(trace.attn_queries):  # not one row per kept query: nothing to show for this layer
            continue
        a = a[:, rows, offset : offset + img.tokens].float()
        a = a.mean(0) if head is None else a[head]
        stack.append(a.mean(0))
    if not stack:
        return None
    grid = torch.stack(stack).mean(0)
    t = img.grid_thw[0]
    grid = grid.reshape(t, img.rows, img.cols)
    return grid if per_slice else grid.mean(0)


def peak_of(grid, image: int, modality: PeakModality = "image") -> Peak:
    """The argmax cell of a `rows × cols` grid of `trace.images[image]` (a video's: averaged over its slices)."""
    flat = int(grid.argmax())
    rows, cols = grid.shape
    return Peak(modality=modality, index=image, row=flat // cols, col=flat % cols, rows=rows, cols=cols, value=float(grid.max()))


def step_peak(trace, step: int, *, layer: int | None = None, head: int | None = None) -> Peak | None:
    """Peak over every item drawn on a grid (images; a video request's videos, averaged over slices: modality "video")
    of the attention of step `step`'s query token."""
    best = None
    for item in trace_items(trace):
        if item.image is None:  # an audio clip, or an Omni video attention was not kept over
            continue
        grid = attention_grid(trace, item.image, queries=[step_query(trace, step)], layer=layer, head=head)
        if grid is not None:
            p = peak_of(grid, item.image, item.modality)
            best = p if best is None or p.value > best.value else best
    return best
