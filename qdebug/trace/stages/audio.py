"""`preprocess`, `encode` and `sync` of an audio request (Qwen2-Audio), from what the recorder captured.

Rows are in time order: row k of a clip covers its feature frames [k·f, (k+1)·f) where f = frames the mask
allows / rows the model keeps, so a row's time is k·f·hop/rate seconds (all read from the run's tensors).
"""

from __future__ import annotations

from qdebug.vocab import FindingKind, StageName

from ..audio import envelope
from ..media_rows import rows_gap, same_rows
from ..schema import Check, Stage
from ..stats import SAME_ROWS, best_block_match
from ..summaries import EncodeClip, EncodeSummary, PreprocessSummary, SyncClip, SyncSummary
from ..tensor_names import TensorKind as T, tensor_name
from .encode import kept_rows


def audio_stages(loaded, request, prepared, rec, rows: dict, notes: list[str], tensors: dict) -> tuple[dict[str, Stage], list[dict]]:
    """The three stages, and one `meta.audio` entry per clip (source, rate, frames, span, seconds per row); `rows`,
    `notes`: `trace.media.item_rows` of its encoder calls."""
    inputs = prepared.inputs
    fe = loaded.processor.feature_extractor
    rate, hop = int(fe.sampling_rate), int(fe.hop_length)
    frames = inputs["feature_attention_mask"].sum(-1).tolist() if "feature_attention_mask" in inputs else []
    clips = []
    for i, clip in enumerate(request.audios):
        span = prepared.spans[i] if i < len(prepared.spans) else None
        allowed = int(frames[i]) if i < len(frames) else 0
        kept = loaded.adapter.rows_for_frames(loaded.model, allowed) if allowed else 0
        clips.append({
            "index": i, "path": clip.source, "source_rate": clip.rate, "rate": rate, "seconds": clip.seconds,
            "frames": allowed, "feature_frames": int(inputs["input_features"].shape[-1]), "rows": kept,
            "span": list(span) if span else None, "seconds_per_row": (allowed / kept) * hop / rate if kept else 0.0,
        })
        tensors[tensor_name(T.AUDIO_ENVELOPE, item=i)] = envelope(clip.samples)

    stages: dict[str, Stage] = {StageName.PREPROCESS: Stage(
        StageName.PREPROCESS,
        PreprocessSummary(text=prepared.text, num_tokens=len(inputs["input_ids"][0]),
                          input_features_shape=list(inputs["input_features"].shape) if "input_features" in inputs else None,
                          frames_kept=[c["frames"] for c in clips], spans=[c["span"] for c in clips]),
        [Check("one placeholder span per clip", len(prepared.spans) == len(request.audios), kind=FindingKind.SHAPE_MISMATCH)],
    )}

    # encode: each clip's rows the mask allows, cut from the projector's padded block (clips × most rows × dim)
    audio = [e.module for e in loaded.adapter.encoders() if e.modality == "audio"]
    blocks = [r for module, _, r in rec.encoder_calls if module in audio and r.ndim == 3]
    padded = int(blocks[0].shape[1]) if blocks else 0
    expected = None
    if rec.position_ids is not None:  # the model's own 1-D positions: what generate derives from the attention mask
        expected = (inputs["attention_mask"][0].long().cumsum(-1) - 1).clamp(min=0)
    stages.update(clip_stages(clips, rows, padded, rec.embeds, rec.position_ids, expected, tensors))
    stages[StageName.ENCODE].checks[:0] = [Check(note, False, kind=FindingKind.SHAPE_MISMATCH) for note in notes]
    return stages, clips


def clip_stages(clips: list[dict], rows: dict, padded: int, embeds, position_ids, expected_positions, tensors: dict, first: int = 0,
                served: dict[int, str] | None = None) -> dict[str, Stage]:
    """`encode` and `sync` of audio clips: each clip's encoder rows (`rows`: clip index → rows the mask allows;
    `padded`: rows per clip the encoder produced), where they landed in the decoder's input, and the positions.
    `first` > 0 (an engine trace after a prefix-cache hit): `embeds` and the positions start at position `first`; a
    clip's placeholders before it are not checked, and a clip with none computed is said as `served[index]`."""
    import torch

    served = served or {}
    encode_rows, enc_summary, enc_checks = [], [], []
    per_clip: list[SyncClip] = []
    for c in clips:
        start, end = c["span"] or (0, 0)
        if c["index"] not in rows and c["span"] and end <= first:  # every placeholder of it served from the prefix cache
            said = served.get(c["index"]) or "served whole from the prefix cache"
            enc_summary.append(EncodeClip(audio=c["index"], cached=said))
            per_clip.append(SyncClip(audio=c["index"], text_offset=start, audio_offset=None, placeholders=end - start,
                                     frames=c["frames"], cached=said))
            continue
        if c["index"] not in rows:
            enc_checks.append(Check(f"clip {c['index']}: encoder ran", False, "no encoder rows recorded", FindingKind.SHAPE_MISMATCH))
            continue
        clip_rows = rows[c["index"]]
        encode_rows.append(clip_rows)
        fields, check = kept_rows(clip_rows, c["index"], f"clip {c['index']}", tensors)
        enc_summary.append(EncodeClip(audio=c["index"], rows_out=padded or clip_rows.shape[0], **fields))
        enc_checks.append(check)
    stages: dict[str, Stage] = {StageName.ENCODE: Stage(StageName.ENCODE, EncodeSummary(audio=enc_summary), enc_checks)}

    checks = []
    if embeds is not None:
        tensors[tensor_name(T.SYNC_EMBEDS)] = embeds
    for c, clip_rows in zip([c for c in clips if c["index"] in rows], encode_rows):
        start, end = c["span"] or (0, 0)
        skip = min(max(0, first - start), clip_rows.shape[0])  # its first placeholders, not in this run's stream
        part, lo, hi = clip_rows[skip:], start + skip - first, end - first
        same_len = embeds is not None and hi - lo == part.shape[0] and lo >= 0
        exact = same_len and same_rows(embeds[lo:hi], part)  # NaN-aware: a NaN row copied into place is in place
        diff = rows_gap(embeds[lo:hi], part) if same_len and len(part) else None
        if exact and len(part):  # its very rows, bit for bit, at its placeholders (a cosine cannot say so of NaN rows)
            landed, score = start, 1.0
        else:
            landed, score = best_block_match(part, embeds) if embeds is not None and len(part) else (None, 0.0)
            landed = landed + first - skip if landed is not None and score >= SAME_ROWS else None
        partly = (served.get(c["index"]) or f"{skip} placeholders served from the prefix cache") if skip else None
        per_clip.append(SyncClip(audio=c["index"], text_offset=start, audio_offset=landed, match=score, rows=clip_rows.shape[0],
                                 placeholders=end - start, frames=c["frames"], max_abs_diff=diff, cached=partly))
        checks.append(Check(f"clip {c['index']}: placeholders == rows the mask allows", end - start == clip_rows.shape[0] == c["rows"],
                            f"{end - start} placeholders, {clip_rows.shape[0]} rows for {c['frames']} frames", FindingKind.SHAPE_MISMATCH))
        checks.append(Check(f"clip {c['index']}: audio offset == text offset", landed == start,
                            f"audio {landed}, text {start}" if landed is not None else f"its rows are not in the stream (text {start})", FindingKind.DESYNC))
        checks.append(Check(f"clip {c['index']}: merged rows equal encode rows", exact, f"max |diff| {diff}", FindingKind.FINGERPRINT))
    summary = SyncSummary(audio=sorted(per_clip, key=lambda clip: clip.audio or 0))  # clips served whole are said in order too
    if position_ids is not None:
        received = position_ids.cpu()
        tensors[tensor_name(T.SYNC_POSITION_IDS)] = received
        summary.position_ids_shape = list(received.shape)
        if expected_positions is not None:
            expected_positions = expected_positions[first:]
            same = received.shape[-1] == expected_positions.shape[0] and bool(torch.equal(received[0].long(), expected_positions))
            checks.append(Check("position ids == 1-D text positions", same, "identical" if same else "positions differ", FindingKind.POSITION_IDS))
    stages[StageName.SYNC] = Stage(StageName.SYNC, summary, checks)
    return stages
