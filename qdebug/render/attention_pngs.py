"""Attention PNGs (matplotlib), one drawer per modality in one table: an image's heatmap per generated token, a video's
per temporal slice, an audio clip's strip under its waveform; the peak boxed and named as the report and the JSON name it."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from qdebug.trace.tensor_names import TensorKind as T

from .files import pyplot, save_png
from .png_text import wrap_to_fit

RAMP = "inferno"


def steps_phrase(trace, steps: list[int]) -> str:
    """What a picture's panels show: "generated token 2 ('circle')" for one step, never "each generated token"."""
    if len(steps) == 1:
        k = steps[0]
        return f"generated token {k} ({trace.steps[k].token if k < len(trace.steps) else '?'!r})"
    shown = f"{steps[0]}–{steps[-1]}" if steps == list(range(steps[0], steps[-1] + 1)) else ", ".join(map(str, steps))
    return f"generated tokens {shown} (a panel each)"


def patch_axes(ax, rows: int, cols: int, w: float, h: float) -> None:
    """Row and column axes in merged patches (the peak's row/col, as the report and the JSON give them) over a picture
    drawn `w` × `h` wide: ticks at patch centres (at most about 8 a side), labelled by index, and the axes named."""
    for n, size, set_ticks, set_label, word in ((cols, w, ax.set_xticks, ax.set_xlabel, "patch column"),
                                                (rows, h, ax.set_yticks, ax.set_ylabel, "patch row")):
        every = max(1, -(-n // 8))
        shown = list(range(0, n, every))
        set_ticks([(i + 0.5) * size / n for i in shown], [str(i) for i in shown], fontsize=6)
        set_label(word, fontsize=7, labelpad=1)
    ax.tick_params(length=2, pad=1)


def attention_png(trace, pil_images, path: str | Path, *, steps: list[int], layer: int | None = None, head: int | None = None) -> Path:
    """Draw the image with one generation step's attention overlaid per panel (4 panels a row, image by image)."""
    import math

    import numpy as np

    from qdebug.analysis.attention import attention_grid, peak_of, step_query

    plt = pyplot()

    steps = steps or [0]
    per_row = min(4, len(steps))
    rows_per_image = math.ceil(len(steps) / per_row)
    n_rows = max(1, len(trace.images)) * rows_per_image
    # constrained layout keeps the title and colour bars in the figure; a single panel is widened so the title has room
    fig, axes = plt.subplots(n_rows, per_row, figsize=(max(4.5, 3.0 * per_row), 3.1 * n_rows + 0.8), squeeze=False, layout="constrained")
    which = f"layer {layer}" if layer is not None else "mean of layers"
    which += f", head {head}" if head is not None else ", mean of heads"
    images = "the image" if len(trace.images) <= 1 else f"each of its {len(trace.images)} images"
    scale = "; each panel has its own colour scale" if len(steps) > 1 or len(trace.images) > 1 else ""
    fig.suptitle(f"attention of {steps_phrase(trace, steps)} to {images} ({which}{scale})\n\"{trace.generated_text}\"", fontsize=10)
    for ax in axes.flat:
        ax.axis("off")
    for i, img in enumerate(trace.images):
        pil = pil_images[img.index] if img.index < len(pil_images) else None
        w, h = pil.size if pil is not None else (img.cols, img.rows)
        for j, k in enumerate(steps):
            ax = axes[i * rows_per_image + j // per_row][j % per_row]
            ax.axis("on")
            patch_axes(ax, img.rows, img.cols, w, h)
            if pil is not None:
                ax.imshow(np.asarray(pil.convert("RGB")), extent=(0, w, h, 0))
            grid = attention_grid(trace, img.index, queries=[step_query(trace, k)], layer=layer, head=head)
            if grid is not None:
                shown = ax.imshow(grid.numpy(), cmap="inferno", alpha=0.55, extent=(0, w, h, 0), interpolation="nearest")
                p = peak_of(grid, img.index)
                ax.add_patch(plt.Rectangle((p.col * w / p.cols, p.row * h / p.rows), w / p.cols, h / p.rows, fill=False, ec="cyan", lw=2))
                bar = fig.colorbar(shown, ax=ax, fraction=0.046, pad=0.02)
                bar.ax.tick_params(labelsize=6)
                bar.formatter.set_useOffset(False)  # a nearly flat grid must not print "1e-7+1.48e-3" over the panel
                bar.update_ticks()
            token = trace.steps[k].token if k < len(trace.steps) else "?"
            ax.set_title(f"step {k}: {token!r}" + (f" · image {img.index}" if len(trace.images) > 1 else ""), fontsize=9)
    wrap_to_fit(fig)
    return save_png(fig, path)


def video_png(trace, frames: list[list], path: str | Path, *, steps: list[int] | None = None, layer: int | None = None,
              head: int | None = None) -> Path:
    """Per video a row of panels, one per temporal slice: the slice's first frame, the generated tokens' attention over it,
    and the peak (over every slice) boxed and named as (time s, row, col), the words the report and the JSON give (every
    generated token's: `steps` is not drawn one by one)."""
    import numpy as np

    from qdebug.analysis.item_attention import slice_grids, video_peak, video_preps

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


def audio_png(trace, media: list, path: str | Path, *, steps: list[int], layer: int | None = None, head: int | None = None) -> Path:
    """One panel per generation step: the clip's waveform envelope with its attention strip beneath, peak marked (`media`:
    unused, the clips are the trace's)."""
    import numpy as np

    from qdebug.analysis.attention import step_query
    from qdebug.analysis.item_attention import attention_strip, clip_items, strip_peak

    plt = pyplot()

    info = clip_items(trace)
    steps = steps or [0]
    n = max(1, len(info)) * len(steps)
    fig, axes = plt.subplots(n, 1, figsize=(8, 1.9 * n + 0.8), squeeze=False, layout="constrained")  # room for the title
    which = f"layer {layer}" if layer is not None else "mean of layers"
    which += f", head {head}" if head is not None else ", mean of heads"
    fig.suptitle(f"attention of {steps_phrase(trace, steps)} over the clip ({which})\n\"{trace.generated_text}\"", fontsize=10)
    for i, clip in enumerate(info):
        env = trace.tensor_or_none(T.AUDIO_ENVELOPE, item=clip.item)
        seconds, per_row = clip.seconds or 0.0, clip.seconds_per_row or 0.0
        for j, k in enumerate(steps):
            ax = axes[i * len(steps) + j][0]
            if env is not None:
                t = np.linspace(0, seconds, len(env))
                e = env.numpy() / (float(env.max()) or 1.0)
                ax.fill_between(t, -e, e, color="steelblue", lw=0)
            strip = attention_strip(trace, clip.index, queries=[step_query(trace, k)], layer=layer, head=head)
            if strip is not None and strip.numel():
                span = per_row * strip.shape[0]
                ax.imshow(strip.numpy()[None], cmap=RAMP, aspect="auto", extent=(0, span, -1.6, -1.1), interpolation="nearest")
                p = strip_peak(trace, strip, clip.index)
                ax.axvline(p.time() + per_row / 2, color="cyan", lw=1.5)
                ax.text(p.time(), 1.05, f"peak {p.time():.2f} s", fontsize=8, color="black")
            ax.set_xlim(0, max(seconds, 1e-3))
            ax.set_ylim(-1.7, 1.3)
            ax.set_yticks([])
            ax.set_xlabel("seconds", fontsize=8)
            token = trace.steps[k].token if k < len(trace.steps) else "?"
            ax.set_title(f"step {k}: {token!r} · clip {clip.index}", fontsize=9)
    wrap_to_fit(fig)
    return save_png(fig, path)


# what each modality's picture is drawn by; each takes (trace, media, path, *, steps, layer, head), media being the
# request's PIL images (image), each video's sampled frames (video), or nothing (audio: the trace holds the envelope)
PNGS: dict[str, Callable[..., Path]] = {"image": attention_png, "video": video_png, "audio": audio_png}
