"""Matplotlib PNGs of `diff` (divergence by stage) and `replay` (the offset timeline); attention PNGs are attention_pngs.py's."""

from __future__ import annotations

from pathlib import Path

from qdebug.vocab import StageVerdict

from .files import pyplot, save_png
from .palette import STAGE_VERDICT_COLOUR
from .png_text import wrap_to_fit


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
