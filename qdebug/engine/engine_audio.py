"""The input stages of an audio request (Qwen2-Audio, Qwen2.5-Omni) as the engine ran it: each clip's placeholder span found in
the prompt ids and checked against vLLM's own range, its encoder rows from the engine's encoder cache, where those
rows landed in the decoder's input, and the positions vLLM gave it (the stages of a local trace, trace/stages/audio)."""

from __future__ import annotations

from typing import Any

from qdebug.trace.runner import placeholder_spans
from qdebug.trace.schema import Check, Stage
from qdebug.trace.stages.audio import clip_stages
from qdebug.trace.summaries import PreprocessSummary
from qdebug.vocab import FindingKind, StageName

from .engine_cache import served_items
from .engine_video import model_positions
from .requests import EngineRequest


def audio_stages(req: EngineRequest, model, prompt_text: str, extractor, tensors: dict) -> tuple[dict[str, Stage], list[dict]]:
    """`preprocess`, `encode` and `sync` of the request's clips, and one `meta.audio` entry per clip.

    `extractor`: the checkpoint's feature extractor (its rate and hop turn frames into seconds). vLLM hands the
    worker features, not the file: a clip's path reads `vllm:<hash>` and its source rate is unknown (None).
    """
    import torch

    ids = req.prompt_ids
    indexed = [(i, f) for i, f in enumerate(req.features) if f.modality == "audio"]
    spans = placeholder_spans(ids, model.audio_token_id) if model.audio_token_id is not None else []
    rate, hop = int(extractor.sampling_rate), int(extractor.hop_length)
    clips: list[dict[str, Any]] = []
    rows: dict[int, Any] = {}
    checks = [Check("one placeholder span per clip", len(spans) == len(indexed), f"{len(spans)} spans of audio tokens, {len(indexed)} clips",
                    FindingKind.SHAPE_MISMATCH)]
    for n, (i, feat) in enumerate(indexed):
        span = spans[n] if n < len(spans) else (feat.offset, feat.offset + feat.length)
        kept = req.encode.get(i)
        if kept is not None:
            rows[n] = kept
        count = int(kept.shape[0]) if kept is not None else 0
        frames = int(feat.frames or 0)
        clips.append({"index": n, "path": f"vllm:{feat.identifier[:16]}", "source_rate": None, "rate": rate, "seconds": frames * hop / rate,
                      "frames": frames, "feature_frames": int(feat.pixel_shape[-1]) if feat.pixel_shape else 0, "rows": count,
                      "span": list(span), "seconds_per_row": (frames / count) * hop / rate if count else 0.0})
        checks.append(Check(f"clip {n}: vLLM's placeholder range == its span of audio tokens", (feat.offset, feat.offset + feat.length) == tuple(span),
                            f"vLLM {feat.offset}..{feat.offset + feat.length}, ids {span[0]}..{span[1]}", FindingKind.DESYNC))
    shapes = [f.pixel_shape for _, f in indexed if f.pixel_shape]
    stages: dict[str, Stage] = {StageName.PREPROCESS: Stage(StageName.PREPROCESS, PreprocessSummary(
        text=prompt_text, num_tokens=len(ids), input_features_shape=[len(shapes), *shapes[0][-2:]] if shapes else None,
        frames_kept=[c["frames"] for c in clips], spans=[c["span"] for c in clips]), checks)}
    # a text model's positions: 0..T-1 (what transformers derives from the mask); an MRoPE model's (Qwen2.5-Omni, whose
    # images or videos in the same prompt move them): its own ids, as vLLM recorded them
    expected = torch.arange(len(ids)) if req.expected_positions is None else None
    served, _ = served_items(req, [i for i, _ in indexed])  # a clip the prefix cache served (all of it, or its first rows)
    stages.update(clip_stages(clips, rows, 0, req.rec.embeds, req.rec.position_ids, expected, tensors, req.computed_from or 0, served))
    model_positions(req, stages[StageName.SYNC], tensors)
    return stages, clips
