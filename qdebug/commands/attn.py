"""`qdebug attn`: trace one request, report text, stages, top-k and attention; write PNG/JSON/trace."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from qdebug.errors import InputError
from qdebug.model.choice import ModelChoice
from qdebug.vocab import StageName

if TYPE_CHECKING:
    from qdebug.trace.schema import Trace


@dataclass
class AttnArgs(ModelChoice):
    """Everything `qdebug attn` was asked for (the model: `ModelChoice`'s fields)."""

    images: list[Path]
    prompt: str
    _: KW_ONLY
    max_new_tokens: int = 16
    topk: int = 5
    layer: int | None = None
    head: int | None = None
    token: int | None = None
    png: Path | None = None
    json_out: str | None = None
    save: Path | None = None
    layers: str = "all"
    queries: str = "gen"
    keep_hidden: bool = False
    device_map: str | None = None
    prompt_logits: bool = True  # top-k at every prompt position (for --save and --tui)
    audio: list[Path] = field(default_factory=list)  # clips given with --audio (a positional clip is found by content)
    videos: list[Path] = field(default_factory=list)  # videos given with --video (a positional folder or video file is found)
    fps: float | None = None  # --fps: frames sampled per second (default: a file's own rate; a frame folder plays at 2.0)
    max_frames: int | None = None  # --max-frames (default video_input.MAX_FRAMES)
    use_audio_in_video: bool = False  # --use-audio-in-video (Qwen2.5-Omni: each video's own sound is an audio item too)


@dataclass(frozen=True, kw_only=True)
class AttnResult:
    """What `qdebug attn` produced: the trace, the opened images, and the attention selection it reports on."""

    trace: Trace
    pil_images: list = field(default_factory=list)  # the request's images, opened (PIL; none for audio)
    layer: int | None = None  # --layer (None: mean of layers)
    head: int | None = None  # --head (None: mean of heads)
    token: int | None = None  # --token (None: every generated token)
    videos: list = field(default_factory=list)  # the request's videos (trace.video_input.Video: sampled frames)

    def to_json(self) -> dict:
        """The `--json` document."""
        return _attn_json(self.trace, layer=self.layer, head=self.head)


def _attn_json(trace, *, layer: int | None, head: int | None) -> dict:
    """The `--json` document of one trace at one attention selection."""
    from qdebug.analysis.attention import step_peak

    steps = []
    for step in trace.steps:
        peak = step_peak(trace, step.index, layer=layer, head=head)
        steps.append(
            {
                "index": step.index,
                "token": step.token,
                "token_id": step.token_id,
                "prob": step.prob,
                "entropy": step.entropy,
                "topk": step.topk.rows(),
                "attention_peak": peak.to_json() if peak else None,
            }
        )
        if trace.meta.audio:
            from qdebug.analysis.item_attention import audio_step_peak

            audio_peak = audio_step_peak(trace, step.index, layer=layer, head=head)
            steps[-1]["audio_peak"] = audio_peak.to_json() if audio_peak else None
    from qdebug.analysis.attention import attention_grid, peak_of
    from qdebug.render.media_words import is_video

    video = is_video(trace)  # a Qwen-VL video request: its visual items are under "videos", not "images"

    def image_peak(index):
        grid = attention_grid(trace, index, layer=layer, head=head)
        return peak_of(grid, index).to_json() if grid is not None else None

    visual = {r.image: r.visual_offset for r in trace.stages[StageName.SYNC].summary.images or []} if StageName.SYNC in trace.stages else {}
    for s, step in zip(steps, trace.steps):
        s["raw_topk"] = step.raw_topk.rows() if step.raw_topk else s["topk"]
        s["raw_prob"] = step.raw_prob if step.raw_prob is not None else step.prob
    return {
        "model": trace.meta.model,
        "attention": {"layer": layer, "head": head, "note": trace.meta.attn_capture,
                      "layers_captured": trace.meta.layers_captured or [], "queries": trace.meta.queries,
                      "kernel": trace.meta.model.get("attn_kernel")},
        "processors": trace.meta.processors or [],
        "prompt": trace.request.prompt,
        "generated_text": trace.generated_text,
        "images": [
            {"path": i.path, "size": list(i.size), "grid_thw": list(i.grid_thw), "span": list(i.span) if i.span else None, "grid": [i.rows, i.cols],
             "text_offset": i.span[0] if i.span else None, "visual_offset": visual.get(i.index),
             "attention_peak": image_peak(i.index)}
            for i in ([] if video else trace.images)
        ],
        **({"audio": trace.meta.audio} if trace.meta.audio else {}),
        **({"videos": video_json(trace, layer=layer, head=head)} if video else {}),
        # mixed media (Qwen2.5-Omni): every item at its encoder, as sync measured it (runs, rows, exact)
        **({"media": [m.to_json() for m in trace.stages[StageName.SYNC].summary.media]} if trace.mixed_media and StageName.SYNC in trace.stages else {}),
        "stages": [{"name": s.name, "ok": s.ok} for s in trace.stages.values()],
        "steps": steps,
        "findings": [{k: v for k, v in f.to_json().items() if k in ("kind", "severity", "stage", "message")} for f in trace.findings],
    }


def validate_selection(trace, layer: int | None, head: int | None, token: int | None) -> None:
    """Check --layer/--head/--token against what the trace holds."""
    n_layers, n_heads = trace.meta.num_layers, trace.meta.num_heads
    if layer is not None and not 0 <= layer < n_layers:
        raise InputError(f"--layer {layer}: expected 0..{n_layers - 1}")
    if head is not None and not 0 <= head < n_heads:
        raise InputError(f"--head {head}: expected 0..{n_heads - 1}")
    captured = trace.meta.layers_captured
    if layer is not None and captured is not None and layer not in captured:
        raise InputError(f"--layer {layer}: attention was recorded for layers {captured} only; expected one of them (see --layers)")
    if token is not None and not 0 <= token < max(1, len(trace.steps)):
        raise InputError(f"--token {token}: expected 0..{len(trace.steps) - 1} (generated steps)")


def check_before_load(args: AttnArgs) -> None:
    """Check --layer/--head/--token against the config and --max-new-tokens, before any weights load."""
    from qdebug.model.limits import check_index, decoder_limits

    limits = decoder_limits(args.spec)
    check_index("--layer", args.layer, limits.num_layers, f"the model has {limits.num_layers} decoder layers")
    check_index("--head", args.head, limits.num_heads, f"the model has {limits.num_heads} attention heads")
    check_index("--token", args.token, args.max_new_tokens, f"generation steps with --max-new-tokens {args.max_new_tokens}")


def run_attn(args: AttnArgs) -> AttnResult:
    """Check the selection, load, trace and check the findings; outputs are written by `write_outputs`."""
    from qdebug.commands.common import loading, quiet_transformers
    from qdebug.trace.policy import parse_layers, parse_queries, resolve_layers
    from qdebug.trace.runner import RecordPolicy, trace_request

    check_before_load(args)
    if args.layer is not None and args.layer < 0 or args.head is not None and args.head < 0:
        raise InputError("--layer/--head: expected a non-negative index")
    from qdebug.commands.media_input import model_media, read_media, sort_media

    layer_items, queries = parse_layers(args.layers), parse_queries(args.queries)
    intake = read_media(model_media(args.spec), sort_media(args.images, args.audio, args.videos), fps=args.fps, max_frames=args.max_frames,
                        use_audio_in_video=args.use_audio_in_video)
    request, pil_images, videos = intake.request(args.prompt, args.max_new_tokens), intake.images, intake.videos
    quiet_transformers()
    from qdebug.trace.estimate import refuse_if_too_big

    video_tokens: int | None = None
    if videos:  # about one frame's image tokens per temporal slice of two frames (the video processor's own sizes differ a little)
        from qdebug.trace.estimate import image_tokens_of

        video_tokens = sum(image_tokens_of(args.spec, [v.size]) * -(-len(v.frames) // 2) for v in videos)
    refuse_if_too_big(args.spec, args.device, args.dtype, image_tokens=video_tokens, images=pil_images, max_new_tokens=args.max_new_tokens,
                      layers=args.layers, device_map=args.device_map)
    with loading(args.spec):
        loaded = args.load(device_map=args.device_map)
    attn_layers = resolve_layers(args.layers, layer_items, len(loaded.adapter.decoder_layers(loaded.model)))
    options = RecordPolicy(topk=args.topk, attn_layers=attn_layers, keep_hidden=args.keep_hidden, queries=queries,
                             prompt_logits=args.prompt_logits)
    trace = trace_request(loaded, request, options)
    from qdebug.analysis.detectors.deepstack import deepstack_findings

    trace.findings.extend(deepstack_findings(trace))  # Qwen3-VL: deepstack rows, layers, levels
    validate_selection(trace, args.layer, args.head, args.token)
    return AttnResult(trace=trace, pil_images=pil_images, layer=args.layer, head=args.head, token=args.token, videos=videos)


def write_outputs(args: AttnArgs, result: AttnResult) -> None:
    """Write the PNG, the saved trace and the JSON (each atomically)."""
    from qdebug.commands.common import emit_json
    from qdebug.trace.schema import save_trace

    trace, pil_images = result.trace, result.pil_images
    if args.png is not None:
        from qdebug.render.attention_pngs import PNGS
        from qdebug.render.media_words import visual_word

        kind = "audio" if trace.meta.audio else visual_word(trace)
        media = {"image": pil_images, "video": [v.frames for v in result.videos], "audio": []}[kind]  # what each draws over
        steps = [args.token] if args.token is not None else list(range(len(trace.steps)))
        PNGS[kind](trace, media, args.png, steps=steps or [0], layer=args.layer, head=args.head)
    if args.save is not None:
        save_trace(trace, args.save)
    if args.json_out is not None:
        emit_json(result.to_json(), args.json_out)



def video_json(trace, *, layer: int | None, head: int | None) -> list[dict]:
    """Each video of the trace: frames sampled, temporal slices and grid, its sync, and the attention peak (time s, row, col)."""
    from qdebug.analysis.item_attention import video_peak, video_preps

    sync = {v.video: v for v in trace.stages[StageName.SYNC].summary.videos or []} if StageName.SYNC in trace.stages else {}
    out = []
    for img, prep in zip(trace.images, video_preps(trace)):
        peak = video_peak(trace, img.index, layer=layer, head=head)
        s = sync.get(img.index)
        out.append({"path": img.path, "size": list(img.size), "frames": prep.frames, "frame_indices": prep.frame_indices,
                    "frame_times": prep.frame_times, "temporal_patch_size": prep.temporal_patch_size, "grid_thw": list(img.grid_thw),
                    "slice_times": prep.slice_times, "grid": [img.rows, img.cols], "runs": prep.runs,
                    "temporal_ids": s.temporal_ids if s else None, "expected_temporal_ids": s.expected_temporal_ids if s else None,
                    "attention_peak": peak.to_json() if peak else None})
    return out
