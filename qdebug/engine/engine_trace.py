"""Assemble a Trace from what the engine recorded, with qdebug's own stage functions (trace/stages/).

An engine trace has the stages a local trace has: `preprocess` (the prompt ids vLLM ran, each image's
placeholder span found in those ids, vLLM's own placeholder range checked against it), `encode`, `sync`
(measured landing place of each image's rows, vLLM's positions), `layer.N` (every prompt row), `logits` (the
last prompt position) and `step.K` (raw logits). What vLLM does not expose to a worker is absent, not
invented: the image files (their paths read `vllm:<hash>`), prompt-wide logits, attention weights.

A request whose first N prompt positions the prefix cache (or a KV connector) served holds the rows of positions N..
only (`sync`, `layer.N`); its meta says which positions were served, by which cache, from whom (engine_cache.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from qdebug.findings import Finding
from qdebug.trace.assemble import CapturedRun, assemble, trace_meta
from qdebug.trace.meta import TraceMeta, TraceRequest
from qdebug.trace.runner import placeholder_spans
from qdebug.trace.schema import Check, ImageInfo, Stage, Trace
from qdebug.trace.stages.encode import encode_stage
from qdebug.trace.stages.logits import token_text
from qdebug.trace.stages.sync import sync_stage
from qdebug.trace.stats import topk_of
from qdebug.trace.summaries import LogitsSummary, PreprocessSummary
from qdebug.vocab import FindingKind, Severity, StageName, layer_stage, step_stage

from .engine_cache import cache_meta, served_items
from .engine_video import model_positions
from .requests import EngineRequest


@dataclass
class EngineModel:
    """What the worker knows of the model it serves: names, shape, the image token and merge size."""

    spec: str  # the served model name
    path: str
    architecture: str
    device: str
    dtype: str
    attn_kernel: str  # the attention backend
    num_layers: int
    num_heads: int
    num_kv_heads: int
    hidden_size: int
    vocab_size: int
    image_token_id: int | None
    merge_size: int
    patch_size: int
    engine: dict  # name, version, attention backend, tensor-parallel size and rank
    deepstack_levels: list[int] = field(default_factory=list)  # Qwen3-VL: the vision blocks deepstack features come from
    audio_token_id: int | None = None  # Qwen2-Audio's placeholder
    video_token_id: int | None = None  # Qwen-VL's `<|video_pad|>`
    temporal_patch_size: int = 2  # frames per temporal slice of a video

    def describe(self) -> dict:
        """As the trace meta's `model` block."""
        return {"spec": self.spec, "path": self.path, "architecture": self.architecture, "device": self.device,
                "dtype": self.dtype, "attn_kernel": self.attn_kernel}


def assemble_engine_trace(req: EngineRequest, generated: list[int], model: EngineModel, tok, topk: int = 5, extractor=None) -> Trace:
    """The Trace of one request as the engine ran it (`generated`: the token ids the engine sampled; `extractor`:
    a callable giving the checkpoint's feature extractor, needed for audio requests only): the request record's
    input stages in a CapturedRun, assembled as a local run's (trace.assemble)."""
    rec = req.rec
    ids = req.prompt_ids
    images, checks = _images(req, model)
    tensors: dict = {}
    clips: list[dict] | None = None
    levels: list = []
    prompt_text = tok.decode(ids, skip_special_tokens=False)
    if len({f.modality for f in req.features}) > 1:  # Qwen2.5-Omni's mixed media: one item per encoder input, as a local trace
        from .engine_media import media_stages

        stages = media_stages(req, model, prompt_text, tensors)
    elif any(f.modality == "audio" for f in req.features):  # an audio family's input stages are clip-shaped
        from .engine_audio import audio_stages

        stages, clips = audio_stages(req, model, prompt_text, extractor(), tensors)
    elif any(f.modality == "video" for f in req.features):  # one visual item per video (grid t > 1), as a local trace
        from .engine_video import video_stages

        stages, images = video_stages(req, model, prompt_text, tensors)
    else:
        stages, levels = _image_stages(req, model, prompt_text, images, checks, tensors)
    last = topk_of(rec.step_logits[0], topk)[0] if rec.step_logits else []
    logits = Stage(StageName.LOGITS, LogitsSummary(positions=len(ids), k=topk, last_topk=[token_text(tok, i) for i in last],
                                                   prompt_topk="last position only"))
    findings = _layout_findings(req)
    if len(rec.step_logits) < len(generated):
        findings.append(Finding(kind=FindingKind.PARTIAL_COMPARISON, severity=Severity.INFO, stage=step_stage(len(rec.step_logits)),
                                message=f"the engine sampled {len(generated)} tokens; logits of {len(rec.step_logits)} were recorded"))
    run = CapturedRun(rec=rec, prompt_text=prompt_text, input_ids=list(ids), images=images, stages=stages, generated=list(generated),
                      num_layers=model.num_layers, logits=lambda _: logits, meta=_meta(model, req, clips),
                      request=_request(req, prompt_text, images, clips), findings=findings, tensors=tensors)
    trace = assemble(run, tok, topk)
    if model.deepstack_levels:
        _attach_deepstack(trace, req, model, levels)
    return trace


def _image_stages(req: EngineRequest, model: EngineModel, prompt_text: str, images: list[ImageInfo], checks: list[Check],
                  tensors: dict) -> tuple[dict[str, Stage], list]:
    """`preprocess`, `encode` and `sync` of an image request, and the deepstack levels' rows (Qwen3-VL; else []); an image
    the prefix cache served (all or its first placeholders) is said so, and only what this run computed is checked."""
    rec = req.rec
    rows, parts = {}, []
    indexes = [i for i, f in enumerate(req.features) if f.modality == "image"]
    served, whole = served_items(req, indexes)
    for k, i in enumerate(indexes):
        if i in req.encode:  # an image without its rows fails encode_stage's check for it, as it should
            rows[k], levels_k = _split_levels(req.encode[i], model)
            parts.append(levels_k)
    levels: list = []
    if parts and all(parts):  # each deepstack level's rows, the images' back to back (Qwen3-VL)
        import torch

        levels = [torch.cat(level) for level in zip(*parts)]
    preprocess = Stage(StageName.PREPROCESS, PreprocessSummary(
        text=prompt_text, num_tokens=len(req.prompt_ids),
        pixel_values_shape=_pixel_shape(req), image_grid_thw=[list(i.grid_thw) for i in images], spans=[list(i.span or ()) for i in images],
    ), checks)
    encode, encode_rows = encode_stage(rows, [], images, tensors, {k: served[k] for k in whole})
    sync = sync_stage(None, images, encode_rows, rec, {}, tensors, first=req.computed_from or 0, served=served)
    model_positions(req, sync, tensors)  # the ids received against the model's own get_mrope_input_positions
    return {StageName.PREPROCESS: preprocess, StageName.ENCODE: encode, StageName.SYNC: sync}, levels


def _request(req: EngineRequest, prompt_text: str, images: list[ImageInfo], clips: list[dict] | None) -> TraceRequest:
    """The request as the trace names it: media as vLLM's `vllm:<hash>` identities (a video's under `videos`)."""
    video = any(f.modality == "video" for f in req.features)
    paths = [i.path for i in images]
    return TraceRequest(prompt=prompt_text, id=req.name, images=[] if video else paths, max_new_tokens=req.max_tokens,
                        audio=[c["path"] for c in clips] if clips is not None else None, videos=paths if video else None)


def _layout_findings(req: EngineRequest) -> list[Finding]:
    """A kernel that received its rows in another layout than the projection made them (seed 001), per layer."""
    from .layouts import HEAD_FIRST, TOKEN_MAJOR

    out = []
    for layer, seen in sorted(req.layouts.items()):
        if seen["layout"] == TOKEN_MAJOR:
            continue
        what = (f"head and token axes swapped: its {seen['rows']} rows are the projection's rows laid out [H, T, D] "
                f"({seen['heads']} heads) and read as [T, H, D]" if seen["layout"] == HEAD_FIRST
                else "neither the projection's rows nor their head-first reading")
        out.append(Finding(kind=FindingKind.LAYOUT, severity=Severity.ERROR, stage=layer_stage(layer), layer=layer,
                           message=f"layer {layer} {seen['tensor']} entering vLLM's kernel (prefill): {what}"))
    return out


def _split_levels(rows, model: EngineModel):
    """vLLM's Qwen3-VL encoder hands the decoder [main | level 0 | level 1 ...] side by side in one row: the
    main rows (the encode stage) and each deepstack level's rows, split by the decoder's width."""
    width, levels = model.hidden_size, len(model.deepstack_levels)
    if not levels or rows.shape[-1] != width * (1 + levels):
        return rows, []
    return rows[:, :width], [rows[:, width * (i + 1):width * (i + 2)] for i in range(levels)]


def _attach_deepstack(trace: Trace, req: EngineRequest, model: EngineModel, encoded: list) -> None:
    """Deepstack evidence as the local trace keeps it: per layer, the rows the engine added and their vision level."""
    import math

    import torch

    from qdebug.trace.deepstack_record import addition_record, attach_deepstack

    layers = {}
    for layer in range(model.num_layers):
        entry = req.deepstack.get(layer, {"rows": [], "added": [], "before_sq": 0.0})
        added = torch.cat(entry["added"]) if entry["added"] else None
        layers[layer] = addition_record(entry["rows"], added, math.sqrt(entry["before_sq"]), encoded, model.deepstack_levels)
    attach_deepstack(trace, model.deepstack_levels, len(encoded), layers)


def _images(req: EngineRequest, model: EngineModel) -> tuple[list[ImageInfo], list[Check]]:
    """Each image's span from the prompt ids (evidence), checked against vLLM's own placeholder range."""
    feats = [f for f in req.features if f.modality == "image"]
    spans = placeholder_spans(req.prompt_ids, model.image_token_id) if model.image_token_id is not None else []
    images, checks = [], [Check("one placeholder span per image", len(spans) == len(feats),
                                f"{len(spans)} spans of image tokens, {len(feats)} images", FindingKind.SHAPE_MISMATCH)]
    m = model.merge_size
    for i, feat in enumerate(feats):
        span = spans[i] if i < len(spans) else (feat.offset, feat.offset + feat.length)
        t, h, w = feat.grid_thw or (1, 0, 0)
        # vLLM hands a worker processed pixels, not the file: the size is the resized image's (grid × patch)
        images.append(ImageInfo(i, f"vllm:{feat.identifier[:16]}", (w * model.patch_size, h * model.patch_size), (t, h, w),
                                (span[0], span[1]), h // m, w // m))
        checks.append(Check(f"image {i}: vLLM's placeholder range == its span of image tokens",
                            (feat.offset, feat.offset + feat.length) == tuple(span),
                            f"vLLM {feat.offset}..{feat.offset + feat.length}, ids {span[0]}..{span[1]}", FindingKind.DESYNC))
    return images, checks


def _pixel_shape(req: EngineRequest) -> list[int] | None:
    shapes = [f.pixel_shape for f in req.features if f.modality == "image" and f.pixel_shape]
    return [sum(s[0] for s in shapes), *shapes[0][1:]] if shapes else None


def _meta(model: EngineModel, req: EngineRequest, clips: list[dict] | None) -> TraceMeta:
    """The engine trace's meta (trace.assemble.trace_meta), with the engine block: which engine, this request's steps,
    encoder calls and the layout each layer's kernel received."""
    engine = {**model.engine, "request_id": req.req_id, "batches": req.batches, "co_scheduled": sorted(req.co_scheduled), "encoder_calls": req.encoder_calls,
              "kernel_inputs": {str(layer): seen["layout"] for layer, seen in sorted(req.layouts.items())}, **cache_meta(req)}
    if req.closed_at_shutdown is not None:  # only then: other traces keep their exact shape
        engine["closed_at_shutdown"] = req.closed_at_shutdown
    return trace_meta(
        model.describe(), (model.num_layers, model.num_heads, model.num_kv_heads, model.hidden_size, model.vocab_size),
        attn_capture=f"no attention weights recorded (engine trace; every layer ran {model.attn_kernel})",
        layers_captured=[], queries="gen", keep_hidden=req.keep_hidden, processors=[], audio=clips, engine=engine,
        input_path=None if req.input_path == "ids" else req.input_path,  # as local traces: set for the embeds path only
    )
