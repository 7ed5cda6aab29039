"""The input stages of a video request as the engine ran it: each video's `<|video_pad|>` runs found in the prompt ids and
checked against vLLM's own placeholder range, its grid and temporal slices (`preprocess`), its encoder rows from the
engine's encoder cache (`encode`), where they landed and the temporal ids its rows received (`sync`): the stages of a
local video trace (trace/stages/video.py), built with the same functions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from qdebug.trace.runner import placeholder_spans
from qdebug.trace.schema import Check, ImageInfo, Stage
from qdebug.trace.stages.encode import encode_stage
from qdebug.trace.stages.sync import sync_stage
from qdebug.trace.stages.video import video_sync
from qdebug.trace.summaries import PreprocessSummary, SyncSummary, VideoPrep
from qdebug.vocab import FindingKind, StageName

from .engine_cache import served_items
from .requests import EngineRequest


@dataclass
class VideoSlices:
    """Each video's runs of `<|video_pad|>` ([start, end) pairs): what `video_sync` reads of a local run's Prepared."""

    video_slices: list[list[tuple[int, int]]]


def video_items(req: EngineRequest, model: Any) -> tuple[list[ImageInfo], list[list[tuple[int, int]]], list[Check]]:
    """(one visual item per video, each video's runs, checks): a video's runs are the runs of video tokens inside vLLM's
    placeholder range for it; their rows are checked against its grid (t·h·w / merge²)."""
    feats = [f for f in req.features if f.modality == "video"]
    runs = placeholder_spans(req.prompt_ids, model.video_token_id) if model.video_token_id is not None else []
    m = model.merge_size
    images, slices, checks, placed = [], [], [], 0
    for n, feat in enumerate(feats):
        start, end = feat.offset, feat.offset + feat.length
        mine = [(s, e) for s, e in runs if start <= s and e <= end]
        placed += len(mine)
        t, h, w = feat.grid_thw or (1, 0, 0)
        rows = sum(e - s for s, e in mine)
        span = (mine[0][0], mine[-1][1]) if mine else (start, end)
        images.append(ImageInfo(n, f"vllm:{feat.identifier[:16]}", (w * model.patch_size, h * model.patch_size), (t, h, w), span,
                                h // m, w // m))
        slices.append(mine)
        checks.append(Check(f"video {n}: its <|video_pad|> runs in vLLM's placeholder range == t·h·w/merge²", rows == t * h * w // (m * m),
                            f"{len(mine)} run(s) of {rows} video tokens in vLLM's range {start}..{end}, grid {t}×{h}×{w}",
                            FindingKind.DESYNC))
    checks.insert(0, Check("one placeholder extent per video", len(runs) == placed and all(s for s in slices),
                           f"{len(runs)} runs of video tokens, {placed} inside the ranges of {len(feats)} videos", FindingKind.SHAPE_MISMATCH))
    return images, slices, checks


def video_stages(req: EngineRequest, model: Any, prompt_text: str, tensors: dict) -> tuple[dict[str, Stage], list[ImageInfo]]:
    """`preprocess`, `encode` and `sync` of a video request, and its visual items (one per video, grid t > 1)."""
    rec: Any = req.rec  # the Recorder, filled as qdebug's hooks fill it
    images, slices, checks = video_items(req, model)
    feats = [(i, f) for i, f in enumerate(req.features) if f.modality == "video"]
    served, whole = served_items(req, [i for i, _ in feats])  # a video the prefix cache served (all of it, or its first rows)
    rows = {k: req.encode[i] for k, (i, _) in enumerate(feats) if i in req.encode}  # a video without rows fails encode
    preps = [VideoPrep(video=img.index, path=img.path, temporal_patch_size=model.temporal_patch_size, grid_thw=list(img.grid_thw),
                       runs=[list(r) for r in runs], pixel_values_videos_shape=feat.pixel_shape,
                       second_per_grid_ts=feat.seconds_per_slice,
                       notes=["vLLM hands the worker processed pixels: the frames sampled and their times are not known here"])
             for img, runs, (_, feat) in zip(images, slices, feats)]
    preprocess = Stage(StageName.PREPROCESS, PreprocessSummary(
        text=prompt_text, num_tokens=len(req.prompt_ids), image_grid_thw=[list(i.grid_thw) for i in images],
        spans=[list(i.span or ()) for i in images], videos=preps or None), checks)
    encode, encode_rows = encode_stage(rows, [], images, tensors, {k: served[k] for k in whole})
    sync = sync_stage(None, [], [], rec, {}, tensors)  # the merged rows and vLLM's positions; the videos below
    received = rec.position_ids
    expected = model_positions(req, sync, tensors)
    summary = sync.summary
    assert isinstance(summary, SyncSummary)
    summary.videos, video_checks = video_sync(None, images, encode_rows, rec, VideoSlices(slices), received, expected,
                                              req.computed_from or 0, served)
    sync.checks[:0] = video_checks
    return {StageName.PREPROCESS: preprocess, StageName.ENCODE: encode, StageName.SYNC: sync}, images


def model_positions(req: EngineRequest, sync: Stage, tensors: dict) -> Any:
    """The model's own MRoPE ids for the prompt (vLLM's `get_mrope_input_positions`, recorded when the request was admitted),
    kept as the sync stage's expected ids and checked against those the decoder received; None when not recorded."""
    import torch

    from qdebug.trace.tensor_names import TensorKind as T, tensor_name

    expected, received = req.expected_positions, req.rec.position_ids
    if req.mrope_delta is not None and isinstance(sync.summary, SyncSummary):
        sync.summary.rope_deltas = [int(req.mrope_delta)]
    if expected is None or received is None:
        return None
    expected = expected[..., req.computed_from or 0:]  # the positions this run computed (after a prefix-cache hit: N..)
    tensors[tensor_name(T.SYNC_EXPECTED_POSITION_IDS)] = expected
    same = expected.shape == received.shape and bool(torch.equal(expected, received))
    detail = "identical" if same else (f"{int((expected != received).any(0).sum())} positions differ" if expected.shape == received.shape
                                       else f"shapes {list(received.shape)} vs {list(expected.shape)}")
    sync.checks.append(Check("MRoPE position ids == the model's get_mrope_input_positions", same, detail, FindingKind.POSITION_IDS))
    return expected
