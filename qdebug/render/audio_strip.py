"""Attention over time for audio clips in the terminal: a strip under the clip's waveform; an audio request's stage lines."""

from __future__ import annotations

import math

from qdebug.trace.items import TraceItem
from qdebug.trace.tensor_names import TensorKind as T
from qdebug.vocab import StageName

BLOCKS = " ▁▂▃▄▅▆▇█"


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

    from qdebug.analysis.item_attention import strip_peak

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
