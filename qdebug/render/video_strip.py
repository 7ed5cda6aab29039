"""A video's attention as a PNG strip: one panel per temporal slice, its frame under the slice's attention, the peak boxed."""

from __future__ import annotations

from pathlib import Path

from .files import pyplot, save_png
from .plots import patch_axes
from .png_text import wrap_to_fit


def video_png(trace, frames: list[list], path: str | Path, *, layer: int | None = None, head: int | None = None) -> Path:
    """Per video a row of panels, one per temporal slice: the slice's first frame, the generated tokens' attention over it,
    and the peak (over every slice) boxed and named as (time s, row, col), the words the report and the JSON give."""
    import numpy as np

    from qdebug.analysis.video_attention import slice_grids, video_peak, video_preps

    plt = pyplot()
    preps = video_preps(trace)
    per_row = max([img.grid_thw[0] for img in trace.images] or [1])
    n = max(1, len(trace.images))
    fig, axes = plt.subplots(n, per_row, figsize=(max(5.0, 2.6 * per_row), 2.6 * n + 1.0), squeeze=False, layout="constrained")
    which = f"layer {layer}" if layer is not None else "mean of layers"
    which += f", head {head}" if head is not None else ", mean of heads"
    for ax in axes.flat:
        ax.axis("off")
    lines = []
    for i, img in enumerate(trace.images):
        grids = slice_grids(trace, img.index, layer=layer, head=head)
        peak = video_peak(trace, img.index, layer=layer, head=head, grids=grids)
        prep = preps[i] if i < len(preps) else None
        lines.append(f"video {img.index} peak: " + (f"{peak.label()} (slice {peak.slice})" if peak else "no attention recorded"))
        video_frames = frames[i] if i < len(frames) else []
        tp = prep.temporal_patch_size if prep else 1
        lo, hi = (float(grids.min()), float(grids.max())) if grids is not None else (0.0, 1.0)
        for k in range(img.grid_thw[0]):
            ax = axes[i][k]
            ax.axis("on")
            frame = video_frames[min(k * tp, len(video_frames) - 1)] if video_frames else None
            w, h = frame.size if frame is not None else (img.cols, img.rows)
            patch_axes(ax, img.rows, img.cols, w, h)
            if frame is not None:
                ax.imshow(np.asarray(frame.convert("RGB")), extent=(0, w, h, 0))
            if grids is not None:  # one colour scale for the whole video, so slices compare
                shown = ax.imshow(grids[k].numpy(), cmap="inferno", alpha=0.55, extent=(0, w, h, 0), interpolation="nearest", vmin=lo, vmax=hi)
            if peak is not None and peak.slice == k:
                ax.add_patch(plt.Rectangle((peak.col * w / peak.cols, peak.row * h / peak.rows), w / peak.cols, h / peak.rows,
                                           fill=False, ec="cyan", lw=2))
            when = prep.slice_times[k] if prep and prep.slice_times and k < len(prep.slice_times) else None
            ax.set_title(f"slice {k}" + (f" · t={when:.2f} s" if when is not None else ""), fontsize=8)
        if grids is not None:  # the video's one scale, beside its row of slices
            bar = fig.colorbar(shown, ax=list(axes[i][: img.grid_thw[0]]), fraction=0.046, pad=0.02)
            bar.ax.tick_params(labelsize=6)
            bar.formatter.set_useOffset(False)  # a nearly flat grid must not print an offset over the panel
            bar.update_ticks()
            bar.set_label("attention (one scale per video)", fontsize=7)
    fig.suptitle(f"attention of every generated token to each temporal slice ({which})\n" + "\n".join(lines), fontsize=9)
    wrap_to_fit(fig)
    return save_png(fig, path)
