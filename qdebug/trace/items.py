"""TraceItem: one media item of a trace (an image, a video or an audio clip), and `trace_items`, the one typed list of
them, read from what any saved trace holds (`images`, the preprocess stage's `videos` / `media`, `meta.audio`).

Nothing is written: old traces (no `videos`, no `media`, an audio entry lacking keys) read with what they have.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal, cast

from qdebug.vocab import StageName

from .cached import computed_from

if TYPE_CHECKING:
    from .schema import ImageInfo, Trace
    from .summaries import EncoderSpan, VideoPrep

Modality = Literal["image", "video", "audio"]
MODALITIES: tuple[Modality, ...] = ("image", "video", "audio")


@dataclass(frozen=True, kw_only=True)
class TraceItem:
    """One media item as the trace holds it: its modality and index there, its placeholders, the LLM rows it occupies,
    its grid (image, video), seconds per row (a Qwen2-Audio clip) and frame/slice times (a video)."""

    modality: Modality
    index: int  # among its modality's items, in message order
    item: int  # among all the request's items: the `item=` index of its tensors (`encode.<item>`)
    source: str  # its path as the trace names it (an engine trace's `vllm:<hash>`; an Omni video's track: the video's)
    span: tuple[int, int] | None  # [first placeholder, last placeholder + 1) in the input ids
    runs: tuple[tuple[int, int], ...] = ()  # [start, end) of each run of its placeholders (one when contiguous)
    rows: int = 0  # LLM tokens (rows) it occupies: t·h·w / merge² for a grid, the rows the model keeps for a clip
    grid_thw: tuple[int, int, int] | None = None  # image, video: vision patches (t, h, w)
    grid: tuple[int, int] | None = None  # image, video: the merged-patch grid (rows, cols) of one temporal slice
    image: int | None = None  # its place in `trace.images` (the grid attention is kept over), None when it has none
    seconds_per_row: float | None = None  # audio (Qwen2-Audio): seconds of the clip each row covers
    seconds: float | None = None  # audio (Qwen2-Audio): the clip's length
    frame_times: tuple[float, ...] | None = None  # video: each sampled frame's time in the source, seconds
    slice_times: tuple[float, ...] | None = None  # video: each temporal slice's time, seconds
    cached: int = 0  # of its placeholders (its first ones), how many an engine served from its prefix cache: not computed in this run

    @property
    def positions(self) -> list[int]:
        """Its placeholder positions, run by run."""
        return [p for s, e in self.runs for p in range(s, e)]

    @property
    def wholly_cached(self) -> bool:
        """Whether every placeholder of it was served from a cache (no row of it was computed or landed in this run)."""
        return self.cached > 0 and self.cached >= len(self.positions)

    @property
    def visual(self) -> bool:
        """Whether it is drawn on a grid (an image or a video)."""
        return self.modality != "audio"

    @property
    def name(self) -> str:
        """`image 0`, `video 1`, `audio 0`: the item as reports name it."""
        return f"{self.modality} {self.index}"


def trace_items(trace: Trace) -> list[TraceItem]:
    """Every media item of the trace, in the request's item order (a single-modality trace: its items in order); each
    says how many of its placeholders the engine served from its prefix cache (`cached`, trace.cached)."""
    first = computed_from(trace)
    items = _items(trace)
    if not first:
        return items
    return [replace(it, cached=sum(1 for p in it.positions if p < first)) for it in items]


def _items(trace: Trace) -> list[TraceItem]:
    pre = trace.stages.get(StageName.PREPROCESS)
    summary = pre.summary if pre is not None else None
    media = getattr(summary, "media", None)
    if media is not None:  # mixed media (Qwen2.5-Omni): one EncoderSpan per item, as preprocess found it
        return [_media_item(trace, m, n) for n, m in enumerate(media)]
    videos = getattr(summary, "videos", None)
    if videos or trace.request.videos:  # a Qwen-VL video request: `trace.images` holds its videos
        preps = {p.video if p.video is not None else n: p for n, p in enumerate(videos or [])}
        items = [_visual_item(trace, im, "video", preps.get(im.index)) for im in trace.images]
    else:
        items = [_visual_item(trace, im, "image", None) for im in trace.images]
    return items + [_clip_item(n, c) for n, c in enumerate(trace.meta.audio or [])]


def items_of(trace: Trace, modality: Modality) -> list[TraceItem]:
    """The trace's items of one modality, in order."""
    return [it for it in trace_items(trace) if it.modality == modality]


def _visual_item(trace: Trace, im: ImageInfo, modality: Modality, prep: VideoPrep | None) -> TraceItem:
    runs = tuple(_pair(r) for r in prep.runs) if prep is not None and prep.runs else ((im.span,) if im.span else ())
    return TraceItem(modality=modality, index=im.index, item=im.index, source=im.path, span=im.span, runs=runs, rows=im.tokens,
                     grid_thw=im.grid_thw, grid=(im.rows, im.cols), image=im.index,
                     frame_times=_floats(prep.frame_times) if prep is not None else None,
                     slice_times=_floats(prep.slice_times) if prep is not None else None)


def _clip_item(n: int, clip: dict) -> TraceItem:
    span = clip.get("span")
    index = int(clip.get("index", n))
    rows = clip.get("rows")
    spr, seconds = clip.get("seconds_per_row"), clip.get("seconds")
    n_rows = int(rows) if rows is not None else (span[1] - span[0] if span else 0)
    return TraceItem(modality="audio", index=index, item=index, source=str(clip.get("path", f"<audio {index}>")),
                     span=_pair(span) if span else None, runs=(_pair(span),) if span else (), rows=n_rows,
                     seconds_per_row=float(spr) if spr is not None else None,
                     seconds=float(seconds) if seconds is not None else (n_rows * float(spr) if spr is not None else None))


def _media_item(trace: Trace, m: EncoderSpan, n: int) -> TraceItem:
    modality: Modality = m.modality if m.modality in MODALITIES else "image"
    index = m.index if m.index is not None else n
    runs = tuple(_pair(r) for r in m.runs or [])
    span = (runs[0][0], runs[-1][1]) if runs else None
    grid_thw = cast("tuple[int, int, int]", tuple(m.grid_thw)) if m.grid_thw else None
    rows = m.expected if m.expected is not None else sum(e - s for s, e in runs)
    image = index if modality == "image" and index < len(trace.images) else None
    return TraceItem(modality=modality, index=index, item=m.item if m.item is not None else n, source=m.source or f"<{modality} {index}>",
                     span=span, runs=runs, rows=rows, grid_thw=grid_thw, grid=_merged(grid_thw, rows), image=image)


def _merged(grid_thw: tuple[int, int, int] | None, rows: int) -> tuple[int, int] | None:
    """The merged-patch grid of one slice: (h, w) / merge, merge from t·h·w / merge² = rows (None when it does not divide)."""
    if grid_thw is None or rows <= 0:
        return None
    t, h, w = grid_thw
    merge = math.isqrt(t * h * w // rows) if t * h * w % rows == 0 else 0
    if merge <= 0 or merge * merge * rows != t * h * w or h % merge or w % merge:
        return None
    return h // merge, w // merge


def _pair(value) -> tuple[int, int]:
    start, end = value
    return int(start), int(end)


def _floats(values: list[float] | None) -> tuple[float, ...] | None:
    return tuple(float(v) for v in values) if values is not None else None
