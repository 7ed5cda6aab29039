"""Attention over a video, one temporal slice at a time, from a Trace: the peak as (time s, row, col)."""

from __future__ import annotations

from qdebug.vocab import StageName

from .attention import Peak, attention_grid


def video_preps(trace) -> list:
    """The preprocess stage's VideoPrep of each video (empty for an image or audio trace)."""
    stage = trace.stages.get(StageName.PREPROCESS)
    return list(stage.summary.videos or []) if stage is not None else []


def slice_grids(trace, video: int, *, layer: int | None = None, head: int | None = None):
    """`t × rows × cols` attention of the generated tokens' queries to each temporal slice of one video, or None."""
    return attention_grid(trace, video, layer=layer, head=head, per_slice=True)


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
