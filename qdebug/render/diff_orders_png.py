"""The per-stage divergence plot of `diff --order both`: one panel per order, on one shared scale."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from qdebug.vocab import StageVerdict

from .files import pyplot, save_png
from .palette import STAGE_VERDICT_COLOUR
from .png_text import wrap_to_fit

if TYPE_CHECKING:
    from qdebug.analysis.diff import DiffResult

_FLOOR = 1e-12  # a stage that agrees exactly is drawn here on the log scale


def diff_orders_png(results: list[tuple[str, DiffResult]], path: str | Path) -> Path:
    """Bars of max |a−b| / max |a| by stage for each (order label, DiffResult), first divergence marked."""
    plt = pyplot()

    widest = max(len([s for s in r.stages if s.verdict != StageVerdict.MISSING]) for _, r in results)
    fig, axes = plt.subplots(len(results), 1, figsize=(max(6, 0.45 * widest), 3.2 * len(results)), sharey=True, squeeze=False)
    for ax, (order, result) in zip(axes[:, 0], results):
        stages = [s for s in result.stages if s.verdict != StageVerdict.MISSING]
        names = [s.name for s in stages]
        values = [max(s.rel, _FLOOR) if s.rel == s.rel and s.rel != float("inf") else 1e3 for s in stages]
        ax.bar(range(len(names)), values, color=[STAGE_VERDICT_COLOUR[s.verdict] for s in stages])
        ax.set_yscale("log")
        ax.axhline(result.tolerance.rtol, color="black", ls="--", lw=1, label=f"rtol {result.tolerance.rtol:g}")
        first = result.first_divergence
        verdict = f"first divergence: {first.name}" if first is not None else "no divergence"
        ax.set_title(f"{order}: {result.a_label} vs {result.b_label} · {verdict}", fontsize=9)
        ax.set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=8)
        ax.set_ylabel("max |a−b| / max |a|", fontsize=8)
        ax.legend(fontsize=8)
    wrap_to_fit(fig)
    fig.tight_layout()
    return save_png(fig, path)
