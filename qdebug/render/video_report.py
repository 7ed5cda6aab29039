"""A video request in the Rich report of `qdebug attn`: its stage lines and one heatmap per temporal slice with the peak."""

from __future__ import annotations

from rich.columns import Columns
from rich.console import Group
from rich.panel import Panel
from rich.text import Text

from qdebug.vocab import StageName

from .data_text import data
from .heatmap import heatmap, legend


def video_stage_what(stage) -> str | None:
    """The `what` cell of preprocess and sync for a video request (None for other stages)."""
    s = stage.summary
    if stage.name == StageName.PREPROCESS and s.videos:
        return f"{s.num_tokens} tokens; " + "; ".join(
            f"video {v.video}: {v.frames} frames (indices {v.frame_indices}, t {v.frame_times} s), temporal patch {v.temporal_patch_size}, "
            f"grid_thw {v.grid_thw}, runs {v.runs}" for v in s.videos)
    if stage.name == StageName.SYNC and s.videos:
        parts = [f"video {v.video}: rows {v.rows}/{v.placeholders} in {len(v.runs or [])} run(s), temporal ids {v.temporal_ids} "
                 f"(get_rope_index {v.expected_temporal_ids})" for v in s.videos]
        if s.rope_deltas is not None:
            parts.append(f"rope_deltas {s.rope_deltas}")
        return "; ".join(parts)
    return None


def video_panel(trace, img, title: str, *, layer: int | None = None, head: int | None = None) -> Panel | None:
    """Heatmaps of the generated tokens' attention over each temporal slice of one video, the peak marked and named."""
    from qdebug.analysis.item_attention import slice_grids, video_peak, video_preps

    grids = slice_grids(trace, img.index, layer=layer, head=head)
    if grids is None:
        return None
    peak = video_peak(trace, img.index, layer=layer, head=head, grids=grids)
    preps = video_preps(trace)
    times = preps[img.index].slice_times if img.index < len(preps) else None
    pictures = []
    for k in range(grids.shape[0]):
        marker = (peak.row, peak.col) if peak is not None and peak.slice == k else None
        when = f" t={times[k]:.2f} s" if times and k < len(times) else ""
        pictures.append(Group(Text(f"slice {k}{when}"), heatmap(grids[k], width=16, marker=marker)))
    body = Group(Columns(pictures, padding=(0, 2)), legend(float(grids.min()), float(grids.max())),
                 data(f"peak: {peak.label()} (slice {peak.slice}) of {peak.rows}×{peak.cols}" if peak else "peak: none"))
    return Panel(body, title=data(title), expand=False)
