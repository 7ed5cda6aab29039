"""The stage table's words for a mixed-media trace (Qwen2.5-Omni): each item at its encoder, its runs and rows."""

from __future__ import annotations

from qdebug.vocab import StageName


def media_stage_what(stage) -> str | None:
    """One line per input stage: every item with its modality, index and what that stage knows of it."""
    spans = getattr(stage.summary, "media", None)
    if spans is None:
        return None
    if stage.name == StageName.PREPROCESS:
        words = [f"{stage.summary.num_tokens} tokens"] + [
            f"{m.modality} {m.index}: " + (f"grid {m.grid_thw}, " if m.grid_thw else f"{m.frames} frames, ")
            + f"{m.expected} rows at {_runs(m.runs)}" for m in spans]
        if stage.summary.use_audio_in_video:
            words.append("use_audio_in_video")
        return "; ".join(words)
    if stage.name == StageName.ENCODE:
        return "; ".join(f"{m.modality} {m.index}: {m.rows}×{m.dim} |x| mean {m.stats.norm_mean:.3g} fp {m.fingerprint[:8]}" for m in spans)
    if stage.name == StageName.SYNC:
        words = [f"{m.modality} {m.index}: rows {m.rows}/{m.placeholders} " + ("exact" if m.exact else f"differ (max |diff| {m.max_abs_diff})")
                 for m in spans]
        if stage.summary.rope_deltas is not None:
            words.append(f"rope_deltas {stage.summary.rope_deltas}")
        return "; ".join(words)
    return None


def _runs(runs) -> str:
    """[start, end) runs, the first three and a count beyond."""
    shown = ", ".join(f"[{s}, {e})" for s, e in runs[:3])
    return shown + (f" +{len(runs) - 3} runs" if len(runs) > 3 else "")
