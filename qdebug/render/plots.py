"""Matplotlib PNGs: attention heatmaps overlaid on the image, one panel per generated token."""

from __future__ import annotations

from pathlib import Path

from .files import write_atomically


def attention_png(trace, pil_images, path: str | Path, *, steps: list[int], layer: int | None = None, head: int | None = None) -> Path:
    """Draw, for each image (row) and each selected step (column), the image with that step's attention overlaid."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from qdebug.analysis.attention import attention_grid, peak_of, step_query

    n_rows, n_cols = max(1, len(trace.images)), max(1, len(steps))
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(2.6 * n_cols, 2.8 * n_rows), squeeze=False)
    which = f"layer {layer}" if layer is not None else "mean of layers"
    which += f", head {head}" if head is not None else ", mean of heads"
    fig.suptitle(f"attention to the image ({which})  —  \"{trace.generated_text}\"", fontsize=9)
    for r, img in enumerate(trace.images):
        pil = pil_images[img.index] if img.index < len(pil_images) else None
        for c, k in enumerate(steps):
            ax = axes[r][c]
            ax.set_xticks([])
            ax.set_yticks([])
            grid = attention_grid(trace, img.index, queries=[step_query(trace, k)], layer=layer, head=head)
            w, h = pil.size if pil is not None else (img.cols, img.rows)
            if pil is not None:
                ax.imshow(np.asarray(pil.convert("RGB")), extent=(0, w, h, 0))
            if grid is not None:
                ax.imshow(grid.numpy(), cmap="inferno", alpha=0.55, extent=(0, w, h, 0), interpolation="nearest")
                p = peak_of(grid, img.index)
                ax.add_patch(plt.Rectangle((p.col * w / p.cols, p.row * h / p.rows), w / p.cols, h / p.rows, fill=False, ec="cyan", lw=1.5))
            token = trace.steps[k].token if k < len(trace.steps) else "?"
            ax.set_title(f"step {k}: {token!r}" + (f"  (image {img.index})" if n_rows > 1 else ""), fontsize=8)
    fig.tight_layout()
    try:
        return write_atomically(path, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
    finally:
        plt.close(fig)
