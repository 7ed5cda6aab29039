"""Attention over an audio clip's rows (time order), from a Trace (no live model)."""

from __future__ import annotations

from qdebug.trace.items import TraceItem, items_of
from qdebug.trace.tensor_names import TensorKind as T

from .attention import Peak, held_layers, query_rows, step_query


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
