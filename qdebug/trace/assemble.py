"""Assemble a Trace from what a Recorder captured: one function per stage (trace/stages/), then findings and meta."""

from __future__ import annotations

import datetime as _dt

from qdebug import __version__
from qdebug.findings import Finding
from qdebug.vocab import Severity, StageName

from .hooks import Recorder
from .input_checks import context_limit, image_digest, input_findings
from .meta import TraceMeta, TraceRequest
from .processors import active_processors
from .schema import Stage, Trace
from .stages.encode import encode_stage
from .stages.layers import layer_stages
from .stages.logits import logits_stage
from .stages.preprocess import image_infos, preprocess_stage
from .stages.steps import step_stages
from .stages.sync import sync_stage


def assemble_trace(loaded, request, prepared, rec: Recorder, generated, queries, options, reached: list[str] | None = None) -> Trace:
    """Build the Trace of a run (prompt `queries` are the positions whose attention rows were kept).

    For a run paused mid-way pass `reached` (the stages so far) and `generated=None`: the trace then holds
    only those stages, and each step's token is the greedy choice of its logits.
    """
    rec.flush()  # nothing below reads a device tensor
    if generated is None:
        generated = [int(logits.argmax()) for logits in rec.step_logits]
    tok = loaded.processor.tokenizer
    ids = prepared.inputs["input_ids"][0].tolist()
    audio = loaded.adapter.modality == "audio"
    tensors: dict = {}
    if prepared.media is not None:  # several encoders in one request: one EncoderSpan per item (trace.stages.media)
        from .stages.media import media_images, media_stages

        images = media_images(loaded, request, prepared)
        stages = media_stages(loaded, request, prepared, rec, tensors)
    elif audio:  # audio families have the same three input stages, clip-shaped
        from .stages.audio import audio_stages

        images = image_infos(loaded, request, prepared)
        stages, audio_meta = audio_stages(loaded, request, prepared, rec, tensors)
    else:
        images = image_infos(loaded, request, prepared)
        encode, encode_rows = encode_stage(rec, images, tensors)
        videos = None
        if request.videos:
            from .stages.video import video_preps

            videos = video_preps(loaded, request, prepared, images)
        stages = {StageName.PREPROCESS: preprocess_stage(request, prepared, images, videos), StageName.ENCODE: encode,
                  StageName.SYNC: sync_stage(loaded, images, encode_rows, rec, prepared.inputs, tensors, prepared)}
    n_layers = len(loaded.adapter.decoder_layers(loaded.model))
    stages.update(layer_stages(rec, n_layers, tensors))
    stages[StageName.LOGITS] = logits_stage(loaded, rec, len(ids), tok, options, tensors)
    steps, step_stage_map = step_stages(rec, generated, tok, options.topk, tensors)
    stages.update(step_stage_map)

    findings = check_findings(stages) + input_findings(request, len(ids), context_limit(loaded.adapter.text_config(loaded.config)))
    meta = _meta(loaded, options, rec, n_layers, audio_meta if audio else None)
    if reached is not None:
        keep = set(reached)
        stages = {name: stage for name, stage in stages.items() if name in keep}
        findings = [f for f in findings if f.stage in keep]
    return Trace(
        meta=meta,
        request=TraceRequest(
            id=request.request_id,
            prompt=request.prompt_text,
            images=list(request.image_paths),
            max_new_tokens=request.max_new_tokens,
            image_sha256=[image_digest(im) for im in request.images],
            audio=list(request.audio_paths) if audio or (prepared.media is not None and request.audio_paths) else None,
            videos=list(request.video_paths) if request.videos else None,
            video_sha256=[_frames_digest(v.frames) for v in request.videos] if request.videos else None,
        ),
        prompt_text=prepared.text,
        input_ids=ids,
        tokens=tok.convert_ids_to_tokens(ids),
        images=images,
        stages=stages,
        steps=steps,
        generated_ids=list(generated),
        generated_text=tok.decode(generated, skip_special_tokens=True),
        attn_queries=list(queries) + [len(ids) + k for k in range(max(0, len(generated) - 1))],
        findings=findings,
        tensors=tensors,
    )


def check_findings(stages: dict[str, Stage]) -> list[Finding]:
    """One error finding per failed check, in stage order."""
    return [Finding(kind=check.kind, severity=Severity.ERROR, message=f"{stage.name}: {check.name} failed ({check.detail})", stage=stage.name)
            for stage in stages.values() for check in stage.checks if not check.ok]


def _meta(loaded, options, rec: Recorder, n_layers: int, audio_meta: list[dict] | None) -> TraceMeta:
    """Versions, the model, what was captured and the decoder's shape."""
    import torch

    text_config = loaded.adapter.text_config(loaded.config)
    return TraceMeta(
        qdebug=__version__,
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        model=loaded.describe(),
        torch=torch.__version__,
        transformers=__import__("transformers").__version__,
        attn_capture=_attn_note(loaded, sorted(rec.attn)),
        layers_captured=sorted(rec.attn),
        queries=options.queries if isinstance(options.queries, str) else list(options.queries),
        keep_hidden=bool(options.keep_hidden),
        processors=active_processors(loaded.model.generation_config) if getattr(rec, "processed_scores", None) else [],
        num_layers=n_layers,
        num_heads=int(text_config.num_attention_heads),
        num_kv_heads=int(text_config.num_key_value_heads),
        hidden_size=int(text_config.hidden_size),
        vocab_size=int(text_config.vocab_size),
        audio=audio_meta,
    )


def _attn_note(loaded, captured: list[int]) -> str:
    """Which layers recorded weights, and which kernel computed every layer's output."""
    if not captured:
        return f"no attention weights recorded; every layer ran {loaded.attn_kernel}"
    n = len(loaded.adapter.decoder_layers(loaded.model))
    layers = "all layers" if len(captured) == n else f"layers {captured}"
    if loaded.attn_kernel == "eager":
        return f"attention weights recorded from the eager kernel in {layers} (eager everywhere)"
    return (f"every layer ran {loaded.attn_kernel}; attention weights in {layers} computed by the eager formula "
            f"for the kept query rows only")


def _frames_digest(frames) -> str:
    """sha256 over a video's sampled frames' digests, in order: the same frames give the same digest."""
    import hashlib

    return hashlib.sha256("".join(image_digest(f) for f in frames).encode()).hexdigest()
