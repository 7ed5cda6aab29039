"""Attention over an audio clip's rows (time order), from a Trace (no live model)."""

from __future__ import annotations

from dataclasses import dataclass

from qdebug.trace.tensor_names import TensorKind as T

from .attention import attention_layers, step_query


@dataclass
class AudioPeak:
    """The hottest row of a clip's attention strip, and its time in the clip."""

    clip: int
    row: int
    rows: int
    seconds: float
    value: float

    def to_json(self) -> dict:
        """As {clip, row, rows, seconds, value}."""
        return {"clip": self.clip, "row": self.row, "rows": self.rows, "seconds": round(self.seconds, 3), "value": self.value}


def clips(trace) -> list[dict]:
    """The trace's audio clips (`meta.audio`), empty for image traces."""
    return list(trace.meta.audio or [])


def attention_strip(trace, clip: int = 0, *, queries: list[int] | None = None, layer: int | None = None, head: int | None = None):
    """Attention (float32, one value per clip row in time order) from the query positions to one clip.

    Averaged over `queries` (default: the queries that chose each generated token), layers unless `layer`,
    heads unless `head`. None when nothing was captured for that choice.
    """
    import torch

    info = clips(trace)
    if clip >= len(info):
        return None
    layers = [l for l in (attention_layers(trace) if layer is None else [layer]) if trace.has_tensor(T.LAYER_ATTN, layer=l)]
    if queries is None:
        queries = [step_query(trace, k) for k in range(len(trace.steps))]
    index = {p: i for i, p in enumerate(trace.attn_queries)}
    rows = [index[q] for q in queries if q in index]
    if not layers or not rows:
        return None
    offset = sum(c["span"][1] - c["span"][0] for c in info[:clip] if c["span"])
    start, end = info[clip]["span"]
    stack = []
    for l in layers:
        a = trace.tensor(T.LAYER_ATTN, layer=l)[:, rows, offset : offset + end - start].float()  # H × q × rows
        a = a.mean(0) if head is None else a[head]
        stack.append(a.mean(0))
    return torch.stack(stack).mean(0)


def strip_peak(trace, strip, clip: int) -> AudioPeak:
    """The argmax row of a strip and its start time in seconds (row × seconds per row, from the trace)."""
    row = int(strip.argmax())
    return AudioPeak(clip, row, int(strip.shape[0]), row * float(clips(trace)[clip]["seconds_per_row"]), float(strip.max()))


def audio_step_peak(trace, step: int, *, layer: int | None = None, head: int | None = None) -> AudioPeak | None:
    """Peak over all clips of the attention of step `step`'s query token."""
    best = None
    for c in clips(trace):
        strip = attention_strip(trace, c["index"], queries=[step_query(trace, step)], layer=layer, head=head)
        if strip is not None and strip.numel():
            p = strip_peak(trace, strip, c["index"])
            best = p if best is None or p.value > best.value else best
    return best
