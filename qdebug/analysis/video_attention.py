"""Attention over a video, one temporal slice at a time, from a Trace: the peak as (time s, row, col)."""

from __future__ import annotations

from dataclasses import dataclass

from qdebug.vocab import StageName

from .attention import Peak, attention_grid


@dataclass
class VideoPeak(Peak):
    """The hottest merged patch over all of one video's temporal slices (`image`: the video's index)."""

    slice: int
    time_s: float  # the slice's time (mean of its first and last frame's), from the preprocess stage

    @property
    def video(self) -> int:
        """The video's index among the request's videos."""
        return self.image

    def to_json(self) -> dict:
        """As {video, slice, time_s, row, col, rows, cols}."""
        return {"video": self.video, "slice": self.slice, "time_s": self.time_s, "row": self.row, "col": self.col,
                "rows": self.rows, "cols": self.cols}

    def label(self) -> str:
        """`t=1.25 s, row 2, col 3` (the words the report and the PNG both print)."""
        return f"t={self.time_s:.2f} s, row {self.row}, col {self.col}"


def video_preps(trace) -> list:
    """The preprocess stage's VideoPrep of each video (empty for an image or audio trace)."""
    stage = trace.stages.get(StageName.PREPROCESS)
    return list(stage.summary.videos or []) if stage is not None else []


def slice_grids(trace, video: int, *, layer: int | None = None, head: int | None = None):
    """`t × rows × cols` attention of the generated tokens' queries to each temporal slice of one video, or None."""
    return attention_grid(trace, video, layer=layer, head=head, per_slice=True)


def video_peak(trace, video: int, *, layer: int | None = None, head: int | None = None, grids=None) -> VideoPeak | None:
    """The argmax over every slice of `slice_grids` (or the `grids` given), with its slice's time."""
    grids = slice_grids(trace, video, layer=layer, head=head) if grids is None else grids
    preps = video_preps(trace)
    if grids is None or video >= len(preps):
        return None
    t, rows, cols = grids.shape
    flat = int(grids.argmax())
    k, rest = divmod(flat, rows * cols)
    times = preps[video].slice_times or []
    return VideoPeak(image=video, slice=k, time_s=float(times[k]) if k < len(times) else float("nan"), row=rest // cols, col=rest % cols,
                     rows=rows, cols=cols, value=float(grids.max()))
