"""Matplotlib PNGs: attention heatmaps overlaid on the image, one panel per generated token."""

from __future__ import annotations

from pathlib import Path

from qdebug.vocab import StageVerdict

from .files import pyplot, save_png
from .palette import STAGE_VERDICT_COLOUR
from .png_text import wrap_to_fit


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


def diff_png(result, path: str | Path) -> Path:
    """Per-stage divergence plot: relative difference by stage (log scale), the tolerance line, the first divergence marked."""
    plt = pyplot()

    stages = [s for s in result.stages if s.verdict != StageVerdict.MISSING]
    names = [s.name for s in stages]
    floor = 1e-12
    values = [max(s.rel, floor) if s.rel == s.rel and s.rel != float("inf") else 1e3 for s in stages]
    fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(names)), 3.6))
    colours = [STAGE_VERDICT_COLOUR[s.verdict] for s in stages]
    ax.bar(range(len(names)), values, color=colours)
    ax.set_yscale("log")
    ax.axhline(result.tolerance.rtol, color="black", ls="--", lw=1, label=f"rtol {result.tolerance.rtol:g}")
    ax.set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=8)
    first = result.first_divergence
    verdict = "no divergence"
    if first is not None and first.name in names:
        # named in the title and on its own tick (text inside a short bar would spill over the tick labels)
        i = names.index(first.name)
        ax.plot([i], [values[i]], marker="v", ms=7, color="black", ls="", label="first divergence", zorder=3)
        ax.get_xticklabels()[i].set(color=STAGE_VERDICT_COLOUR[StageVerdict.DIVERGED], fontweight="bold")
        verdict = f"first divergence: {first.name}"
    ax.set_ylabel("max |a−b| / max |a|\n(0 drawn at 1e-12)", fontsize=8)  # two lines: one is taller than the axes
    ax.set_title(f"{result.a_label} vs {result.b_label} · {verdict}", fontsize=9)
    ax.legend(fontsize=8)
    wrap_to_fit(fig)
    fig.tight_layout()
    return save_png(fig, path)


def timeline_png(report, path: str | Path) -> Path:
    """The offset timeline (time × buffer offset, overwrites with their donors, syncs, request lanes)."""
    from .offset_timeline import draw_timeline

    return draw_timeline(report, path)
