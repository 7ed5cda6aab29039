"""What attention analysis does differently per modality beyond an image's grid of cells: a video's grid per temporal
slice (its peak at a time), an audio clip's strip of rows in time order, and which of these a request is drawn as
(from a Trace, no live model)."""

from __future__ import annotations

from qdebug.trace.items import TraceItem, items_of
from qdebug.trace.tensor_names import TensorKind as T
from qdebug.vocab import StageName

from .attention import Peak, attention_grid, held_layers, query_rows, step_query


def video_preps(trace) -> list:
    """The preprocess stage's VideoPrep of each video (empty for an image or audio trace)."""
    stage = trace.stages.get(StageName.PREPROCESS)
    return list(stage.summary.videos or []) if stage is not None else []


def slice_grids(trace, video: int, *, queries: list[int] | None = None, layer: int | None = None, head: int | None = None):
    """`t × rows × cols` attention of the queries (default: the generated tokens') to each temporal slice of one video, or None."""
    return attention_grid(trace, video, queries=queries, layer=layer, head=head, per_slice=True)


def video_peak(trace, video: int, *, layer: int | None = None, head: int | None = None, grids=None) -> Peak | None:
    """The argmax over every slice of `slice_grids` (or the `grids` given), with its slice's time (a `video` Peak)."""
    grids = slice_grids(trace, video, layer=layer, head=head) if grids is None else grids
    preps = video_preps(trace)
    if grids is None or video >= len(preps):
        return None
    t, rows, cols = grids.shape
    flat = int(grids.argmax())
    k, rest = divmod(flat, rows * cols)
    times = preps[video].slice_times or []
    return Peak(modality="video", index=video, slice=k, seconds=float(times[k]) if k < len(times) else float("nan"), row=rest // cols,
                col=rest % cols, rows=rows, cols=cols, value=float(grids.max()))


def clip_items(trace) -> list[TraceItem]:
    """The audio family's clips as TraceItems (the keys attention is kept over), empty for image, video and Omni traces."""
    return [] if trace.mixed_media else items_of(trace, "audio")


def attention_strip(trace, clip: int = 0, *, queries: list[int] | None = None, layer: int | None = None, head: int | None = None):
    """Attention (float32, one value per clip row in time order) from the query positions to one clip.

    Averaged over `queries` (default: the queries that chose each generated token), layers unless `layer`,
    heads unless `head`. None when nothing was captured for that choice.
    """
    import torch

    info = clip_items(trace)
    if clip >= len(info):
        return None
    layers, rows = held_layers(trace, layer), query_rows(trace, queries)
    if not layers or not rows:
        return None
    offset = sum(c.span[1] - c.span[0] for c in info[:clip] if c.span)
    start, end = info[clip].span or (0, 0)
    stack = []
    for l in layers:
        a = trace.tensor(T.LAYER_ATTN, layer=l)[:, rows, offset : offset + end - start].float()  # H × q × rows
        a = a.mean(0) if head is None else a[head]
        stack.append(a.mean(0))
    return torch.stack(stack).mean(0)


def strip_peak(trace, strip, clip: int) -> Peak:
    """The argmax row of a strip and its start time in seconds (row × seconds per row, from the trace): an `audio` Peak."""
    row = int(strip.argmax())
    per_row = clip_items(trace)[clip].seconds_per_row
    return Peak(modality="audio", index=clip, row=row, rows=int(strip.shape[0]), seconds=row * per_row if per_row is not None else None,
                value=float(strip.max()))


def audio_step_peak(trace, step: int, *, layer: int | None = None, head: int | None = None) -> Peak | None:
    """Peak over all clips of the attention of step `step`'s query token."""
    best = None
    for c in clip_items(trace):
        strip = attention_strip(trace, c.index, queries=[step_query(trace, step)], layer=layer, head=head)
        if strip is not None and strip.numel():
            p = strip_peak(trace, strip, c.index)
            best = p if best is None or p.value > best.value else best
    return best


def drawn_as(trace) -> str | None:
    """How a request's attention is drawn, a key of the render and TUI tables (PNGS, FORMS): "audio" (an audio family's clips), "video" (a Qwen-VL video
    request's visual items), "image"; None when it has nothing to draw over."""
    if not trace.images:
        return "audio" if clip_items(trace) else None
    return "video" if any(it.image is not None for it in items_of(trace, "video")) else "image"
