"""Where each visual item's rows landed in a trace's merged embeddings, images and videos alike (the sync summary keeps
an image's measured offset, a video's placeholder runs and how well the rows there match its encoder rows)."""

from __future__ import annotations

from dataclasses import dataclass

from qdebug.vocab import StageName

from .items import trace_items
from .stats import SAME_ROWS


@dataclass(frozen=True)
class Landing:
    """One visual item (`image`: its place in `trace.images`): its first placeholder and where its own rows are."""

    image: int
    text_offset: int | None
    visual_offset: int | None  # None: its own rows are not in the stream
    rows: int | None


def landings(trace) -> list[Landing]:
    """Each image's and video's landing from the trace's sync stage, in `trace.images` order ([] without a sync stage).
    A video's rows are at its placeholders when the rows there are its encoder rows (mean cosine ≥ SAME_ROWS)."""
    sync = trace.stages.get(StageName.SYNC)
    if sync is None:
        return []
    summary = sync.summary
    images = {s.image: s for s in getattr(summary, "images", None) or []}
    videos = {v.video: v for v in getattr(summary, "videos", None) or []}
    out = []
    for item in trace_items(trace):
        if item.image is None:
            continue
        if item.modality == "video" and item.index in videos:
            v = videos[item.index]
            start = v.runs[0][0] if v.runs else None
            out.append(Landing(item.image, start, start if start is not None and (v.match or 0.0) >= SAME_ROWS else None, v.rows))
        elif item.image in images:
            s = images[item.image]
            out.append(Landing(item.image, s.text_offset, s.visual_offset, s.rows))
    return out
