"""Attention over time for audio clips: a terminal strip under the clip's waveform, and a PNG of the same."""

from __future__ import annotations

import math
from pathlib import Path

from qdebug.trace.items import TraceItem
from qdebug.trace.tensor_names import TensorKind as T
from qdebug.vocab import StageName

from .files import pyplot, save_png
from .plots import steps_phrase
from .png_text import wrap_to_fit

BLOCKS = " ▁▂▃▄▅▆▇█"
RAMP = "inferno"


def _resample(values, width: int) -> list[float]:
    """`values` stretched or squeezed to `width` columns (max within each column: peaks stay visible; a column of NaN
    only is NaN)."""
    n = len(values)
    out = []
    for c in range(width):
        a, b = c * n // width, max(c * n // width + 1, (c + 1) * n // width)
        seen = [float(v) for v in values[a:b] if v == v]
        out.append(max(seen) if seen else float("nan"))
    return out


def _blocks(values: list[float], lo: float, hi: float) -> str:
    """One block per value, its height from lo..hi; a value that is not finite is blank (as the heatmaps draw NaN)."""
    span = (hi - lo) or 1.0
    return "".join(BLOCKS[round(min(1.0, max(0.0, (v - lo) / span)) * (len(BLOCKS) - 1))] if math.isfinite(v) else " " for v in values)


def strip_panel(trace, clip: TraceItem, strip, title: str, width: int = 72):
    """A Rich panel: the clip's waveform envelope, its attention strip (block heights), the peak's time."""
    from rich.panel import Panel
    from rich.text import Text

    from qdebug.analysis.audio_attention import strip_peak

    from .data_text import data

    heading = data(title)
    env = trace.tensor_or_none(T.AUDIO_ENVELOPE, item=clip.item)
    text = Text()
    if env is not None and len(env):
        wave = _resample(env.tolist(), width)
        finite = [v for v in wave if math.isfinite(v)]
        text.append(data(_blocks(wave, 0.0, max(finite, default=0.0)) + "  waveform\n", "cyan", newlines=True))
    att = _resample(strip.tolist(), width)
    finite = [v for v in att if math.isfinite(v)]
    # min..max so a nearly flat strip still shows where it rises
    text.append(data(_blocks(att, min(finite, default=0.0), max(finite, default=0.0)) + "  attention\n", "bold yellow", newlines=True))
    bad = int((~strip.isfinite()).sum())
    if bad:  # the model computed NaN/Inf here (its own checks say where it started): no peak to point at among them
        text.append(f"attention is not finite at {bad:,} of {strip.shape[0]:,} row(s), drawn blank\n", style="bold red")
        if bad == strip.shape[0]:
            return Panel(text, title=heading, expand=False)
    peak = strip_peak(trace, strip.nan_to_num(nan=float("-inf")), clip.index)
    col = min(width - 1, peak.row * width // max(1, peak.rows))
    text.append(" " * col + "^ peak", style="bold")
    seconds, per_row = clip.seconds or 0.0, clip.seconds_per_row or 0.0
    text.append(f"\n0 s{' ' * max(1, width - 10)}{seconds:.2f} s\n", style="dim")
    text.append(f"peak at {peak.time():.2f} s (row {peak.row:d} of {peak.rows:d}, {per_row * 1000:.0f} ms per row)")
    return Panel(text, title=heading, expand=False)


def audio_png(trace, path: str | Path, *, steps: list[int], layer: int | None = None, head: int | None = None) -> Path:
    """One panel per generation step: the clip's waveform envelope with its attention strip beneath, peak marked."""
    import numpy as np

    from qdebug.analysis.attention import step_query
    from qdebug.analysis.audio_attention import attention_strip, clip_items, strip_peak

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


def audio_stage_what(stage) -> str | None:
    """One-line summary of an audio request's preprocess/encode/sync stage (None for other stages)."""
    s = stage.summary
    if stage.name == StageName.PREPROCESS:
        return f"{s.num_tokens} tokens, input_features {s.input_features_shape}, frames kept {s.frames_kept}, spans {s.spans}"
    if stage.name == StageName.ENCODE:
        return "; ".join(f"clip {c.audio}: {c.rows}×{c.dim} of {c.rows_out} rows |x| mean {c.stats.norm_mean:.3g} fp {c.fingerprint[:8]}"
                         for c in s.audio or [])
    if stage.name == StageName.SYNC:
        return "; ".join(f"clip {c.audio}: text@{c.text_offset} audio@{c.audio_offset} rows {c.rows}/{c.placeholders} ({c.frames} frames)"
                         for c in s.audio or [])
    return None
