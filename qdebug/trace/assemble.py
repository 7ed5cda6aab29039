"""Assemble a Trace from what a run captured: one function per stage (trace/stages/), then findings and meta.

One assembly for local and engine traces: a local run (`assemble_trace`) and the engine's request record
(`engine/engine_trace.py`) each fill a `CapturedRun` (the recorder, prompt, visual items, input stages, logits, meta and
request) and `assemble` turns it into the Trace: decoder layers, logits, steps, check findings, in one order.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from dataclasses import dataclass, field

from qdebug import __version__
from qdebug.findings import Finding
from qdebug.vocab import Severity, StageName

from .hooks import Recorder
from .input_checks import context_limit, image_digest, input_findings
from .meta import TraceMeta, TraceRequest
from .processors import active_processors
from .schema import ImageInfo, Stage, Trace
from .stages.inputs import input_stages
from .stages.layers import layer_stages
from .stages.logits import logits_stage
from .stages.steps import step_stages


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
    stages, images, audio_meta = input_stages(loaded, request, prepared, rec, tensors)
    n_layers = len(loaded.adapter.decoder_layers(loaded.model))
    run = CapturedRun(
        rec=rec, prompt_text=prepared.text, input_ids=ids, images=images, stages=stages, generated=list(generated),
        num_layers=n_layers, logits=lambda t: logits_stage(loaded, rec, len(ids), tok, options, t),
        meta=_meta(loaded, options, rec, n_layers, audio_meta),
        request=TraceRequest(
            id=request.request_id,
            prompt=request.prompt_text,
            images=list(request.image_paths),
            max_new_tokens=request.max_new_tokens,
            image_sha256=[image_digest(im) for im in request.images],
            audio=list(request.audio_paths) if audio or request.audio_paths else None,
            videos=list(request.video_paths) if request.videos else None,
            video_sha256=[_frames_digest(v.frames) for v in request.videos] if request.videos else None,
        ),
        findings=input_findings(request, len(ids), context_limit(loaded.adapter.text_config(loaded.config))),
        attn_queries=list(queries) + [len(ids) + k for k in range(max(0, len(generated) - 1))],
        tensors=tensors,
    )
    return assemble(run, tok, options.topk, reached)


@dataclass
class CapturedRun:
    """One request's run as captured, by a local Recorder or an engine's request record: what `assemble` reads.

    `stages`: the input stages (`preprocess`, `encode`, `sync`), in order; `logits(tensors)` builds the logits stage (a
    local run's lm_head over the prompt, an engine's last position); `findings`: the run's own, after its checks'.
    """

    rec: Recorder
    prompt_text: str
    input_ids: list[int]
    images: list[ImageInfo]
    stages: dict[str, Stage]
    generated: list[int]
    num_layers: int
    logits: Callable[[dict], Stage]
    meta: TraceMeta
    request: TraceRequest
    findings: list[Finding] = field(default_factory=list)
    attn_queries: list[int] = field(default_factory=list)
    tensors: dict = field(default_factory=dict)


def assemble(run: CapturedRun, tok, topk: int, reached: list[str] | None = None) -> Trace:
    """The Trace of a captured run: its input stages, then every decoder layer, logits and steps; findings from every
    stage's checks, then the run's own. `reached` keeps only those stages (a run paused mid-way) and their findings."""
    rec, tensors, generated = run.rec, run.tensors, run.generated
    stages = dict(run.stages)
    stages.update(layer_stages(rec, run.num_layers, tensors))
    stages[StageName.LOGITS] = run.logits(tensors)
    steps, step_stage_map = step_stages(rec, generated, tok, topk, tensors)
    stages.update(step_stage_map)
    findings = check_findings(stages) + run.findings
    if reached is not None:
        keep = set(reached)
        stages = {name: stage for name, stage in stages.items() if name in keep}
        findings = [f for f in findings if f.stage in keep]
    return Trace(
        meta=run.meta,
        request=run.request,
        prompt_text=run.prompt_text,
        input_ids=list(run.input_ids),
        tokens=tok.convert_ids_to_tokens(list(run.input_ids)),
        images=run.images,
        stages=stages,
        steps=steps,
        generated_ids=list(generated),
        generated_text=tok.decode(generated, skip_special_tokens=True),
        attn_queries=run.attn_queries,
        findings=findings,
        tensors=tensors,
    )


def check_findings(stages: dict[str, Stage]) -> list[Finding]:
    """One error finding per failed check, in stage order."""
    return [Finding(kind=check.kind, severity=Severity.ERROR, message=f"{stage.name}: {check.name} failed ({check.detail})", stage=stage.name)
            for stage in stages.values() for check in stage.checks if not check.ok]


def _meta(loaded, options, rec: Recorder, n_layers: int, audio_meta: list[dict] | None) -> TraceMeta:
    """Versions, the model, what was captured and the decoder's shape."""
    text_config = loaded.adapter.text_config(loaded.config)
    return trace_meta(
        loaded.describe(), (n_layers, int(text_config.num_attention_heads), int(text_config.num_key_value_heads),
                            int(text_config.hidden_size), int(text_config.vocab_size)),
        attn_capture=_attn_note(loaded, sorted(rec.attn)),
        layers_captured=sorted(rec.attn),
        queries=options.queries if isinstance(options.queries, str) else list(options.queries),
        keep_hidden=bool(options.keep_hidden),
        processors=active_processors(loaded.model.generation_config) if getattr(rec, "processed_scores", None) else [],
        audio=audio_meta,
    )


def trace_meta(model: dict, shape: tuple[int, int, int, int, int], *, attn_capture: str, layers_captured: list[int],
               queries: str | list[int], keep_hidden: bool, processors: list[str], audio: list[dict] | None,
               **more: object) -> TraceMeta:
    """The one TraceMeta of local and engine traces: qdebug, torch and transformers versions, the time, the model (its
    `describe()`), what was captured, and the decoder's `shape` (layers, heads, kv heads, hidden size, vocabulary);
    `more`: fields only some traces set (an engine's `engine` and `input_path`)."""
    import torch

    layers, heads, kv_heads, hidden, vocab = shape
    return TraceMeta(
        qdebug=__version__,
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        model=model,
        torch=torch.__version__,
        transformers=__import__("transformers").__version__,
        attn_capture=attn_capture,
        layers_captured=layers_captured,
        queries=queries,
        keep_hidden=keep_hidden,
        processors=processors,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv_heads,
        hidden_size=hidden,
        vocab_size=vocab,
        audio=audio,
        **more,  # type: ignore[arg-type]
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
