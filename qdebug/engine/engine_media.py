"""The input stages of a request that mixes modalities (Qwen2.5-Omni: images, clips, videos) as the engine ran it, one
EncoderSpan per item as a local mixed-media trace holds them (trace/stages/media.py): each item's placeholders inside
vLLM's own range, its encoder rows from the engine's encoder cache (`encode.<item>`), where they landed, and the
positions the decoder received against the model's own."""

from __future__ import annotations

from typing import Any

from qdebug.trace.schema import Check, Stage
from qdebug.trace.stages.encode import kept_rows
from qdebug.trace.stages.media import item_landed
from qdebug.trace.summaries import EncodeSummary, EncoderSpan, PreprocessSummary, SyncSummary
from qdebug.trace.tensor_names import TensorKind as T, tensor_name
from qdebug.vocab import FindingKind, StageName

from .engine_cache import served_items
from .engine_video import model_positions
from .requests import EngineRequest


def media_stages(req: EngineRequest, model, prompt_text: str, tensors: dict) -> dict[str, Stage]:
    """`preprocess`, `encode` and `sync` of a mixed-media request, items in prompt order (vLLM's placeholder offsets)."""
    ids = req.prompt_ids
    tokens = {"image": model.image_token_id, "video": model.video_token_id, "audio": model.audio_token_id}
    order = sorted(range(len(req.features)), key=lambda i: req.features[i].offset)
    served, whole = served_items(req, order)  # an item the prefix cache served (all of it, or its first placeholders)
    counts: dict[str, int] = {}
    spans: list[EncoderSpan] = []
    rows: dict[int, Any] = {}
    positions: list[list[int]] = []
    for item, i in enumerate(order):
        feat = req.features[i]
        index = counts.get(feat.modality, 0)
        counts[feat.modality] = index + 1
        token = tokens.get(feat.modality)
        mine = [p for p in range(feat.offset, feat.offset + feat.length) if token is not None and ids[p] == token]
        positions.append(mine)
        grid = list(feat.grid_thw) if feat.grid_thw and feat.modality != "audio" else None
        expected = grid[0] * grid[1] * grid[2] // (model.merge_size ** 2) if grid else len(mine)  # a clip: its placeholders
        spans.append(EncoderSpan(modality=feat.modality, index=index, item=item, source=f"vllm:{feat.identifier[:16]}", grid_thw=grid,
                                 frames=feat.frames if feat.modality == "audio" else None, runs=_runs(mine), expected=expected))
        if i in req.encode:
            rows[item] = req.encode[i]
    preprocess = Stage(StageName.PREPROCESS, PreprocessSummary(
        text=prompt_text, num_tokens=len(ids), spans=[[s.runs[0][0], s.runs[-1][1]] if s.runs else [] for s in spans], media=spans,
    ), [Check("every item's placeholders found", all(len(positions[n]) == s.expected for n, s in enumerate(spans)),
              ", ".join(f"{s.modality} {s.index}: {len(positions[n])} placeholders, {s.expected} expected" for n, s in enumerate(spans)),
              FindingKind.SHAPE_MISMATCH)])
    encode_spans, encode_checks = [], []
    for n, s in enumerate(spans):
        r = rows.get(n)
        if r is None and n in whole:  # nothing of it computed in this run: said, not checked
            encode_spans.append(EncoderSpan(modality=s.modality, index=s.index, item=s.item, cached=served[n]))
            continue
        if r is None:
            encode_checks.append(Check(f"{s.modality} {s.index}: rows in the encoder cache", False, "not recorded", FindingKind.SHAPE_MISMATCH))
            continue
        fields, check = kept_rows(r, n, f"{s.modality} {s.index}", tensors)
        encode_spans.append(EncoderSpan(modality=s.modality, index=s.index, item=s.item, **fields))
        encode_checks.append(check)
    encode = Stage(StageName.ENCODE, EncodeSummary(media=encode_spans), encode_checks)
    return {StageName.PREPROCESS: preprocess, StageName.ENCODE: encode, StageName.SYNC: _sync(req, spans, rows, positions, tensors, served)}


def _sync(req: EngineRequest, spans: list[EncoderSpan], rows: dict[int, Any], positions: list[list[int]], tensors: dict,
          served: dict[int, str]) -> Stage:
    """Per item: its rows at its own placeholders, bit for bit (the ones this run computed); then the positions against
    the model's own ids."""
    embeds = req.rec.embeds
    if embeds is not None:
        tensors[tensor_name(T.SYNC_EMBEDS)] = embeds
    out, checks = [], []
    for n, s in enumerate(spans):
        span = EncoderSpan(modality=s.modality, index=s.index, item=s.item, source=s.source, grid_thw=s.grid_thw, frames=s.frames,
                           runs=s.runs, expected=s.expected)
        checks += item_landed(span, rows.get(n), positions[n], embeds, req.computed_from or 0, served.get(n))
        out.append(span)
    summary = SyncSummary(media=out)
    if req.rec.position_ids is not None:
        received = req.rec.position_ids.cpu()
        tensors[tensor_name(T.SYNC_POSITION_IDS)] = received
        summary.position_ids_shape = list(received.shape)
    sync = Stage(StageName.SYNC, summary, checks)
    model_positions(req, sync, tensors)
    return sync


def _runs(positions: list[int]) -> list[list[int]]:
    """[start, end) of each run of consecutive positions."""
    runs: list[list[int]] = []
    for p in positions:
        if runs and runs[-1][1] == p:
            runs[-1][1] = p + 1
        else:
            runs.append([p, p + 1])
    return runs
