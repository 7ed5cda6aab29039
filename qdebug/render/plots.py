"""Matplotlib PNGs: attention heatmaps overlaid on the image, one panel per generated token."""

from __future__ import annotations

from pathlib import Path

from qdebug.vocab import StageVerdict

from .files import pyplot, save_png
from .palette import STAGE_VERDICT_COLOUR


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
    fig, axes = plt.subplots(n_rows, per_row, figsize=(3.0 * per_row, 3.1 * n_rows + 0.5), squeeze=False)
    which = f"layer {layer}" if layer is not None else "mean of layers"
    which += f", head {head}" if head is not None else ", mean of heads"
    fig.suptitle(f"attention of each generated token to the image ({which})\n\"{trace.generated_text}\"", fontsize=10)
    for ax in axes.flat:
        ax.axis("off")
    for i, img in enumerate(trace.images):
        pil = pil_images[img.index] if img.index < len(pil_images) else None
        w, h = pil.size if pil is not None else (img.cols, img.rows)
        for j, k in enumerate(steps):
            ax = axes[i * rows_per_image + j // per_row][j % per_row]
            ax.axis("on")
            ax.set_xticks([])
            ax.set_yticks([])
            if pil is not None:
                ax.imshow(np.asarray(pil.convert("RGB")), extent=(0, w, h, 0))
            grid = attention_grid(trace, img.index, queries=[step_query(trace, k)], layer=layer, head=head)
            if grid is not None:
                shown = ax.imshow(grid.numpy(), cmap="inferno", alpha=0.55, extent=(0, w, h, 0), interpolation="nearest")
                p = peak_of(grid, img.index)
                ax.add_patch(plt.Rectangle((p.col * w / p.cols, p.row * h / p.rows), w / p.cols, h / p.rows, fill=False, ec="cyan", lw=2))
                fig.colorbar(shown, ax=ax, fraction=0.046, pad=0.02).ax.tick_params(labelsize=6)
            token = trace.steps[k].token if k < len(trace.steps) else "?"
            ax.set_title(f"step {k}: {token!r}" + (f" · image {img.index}" if len(trace.images) > 1 else ""), fontsize=9)
    fig.tight_layout()
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
    if result.first_divergence is not None and result.first_divergence.name in names:
        i = names.index(result.first_divergence.name)
        ax.annotate("first divergence", (i, values[i]), xytext=(0, -28), textcoords="offset points", ha="center", color="white",
                    fontsize=8, fontweight="bold", rotation=90, va="top")
    ax.set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("max |a−b| / max |a|  (0 drawn at 1e-12)")
    ax.set_title(f"{result.a_label} vs {result.b_label}", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_png(fig, path)


def timeline_png(report, path: str | Path) -> Path:
    """The offset timeline (time × buffer offset, overwrites with their donors, syncs, request lanes)."""
    from .offset_timeline import draw_timeline

    return draw_timeline(report, path)
