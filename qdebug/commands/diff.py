"""`qdebug diff`: run (or load) two traces that should agree and find the first stage where they part."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path

from qdebug.errors import InputError
from qdebug.model.choice import ModelChoice

from .diff_run import Comparison, DiffRun

VARY = ("none", "paths", "dtype", "attn", "device")
ORDERS = ("image-first", "text-first", "both", "audio-first")


@dataclass
class DiffSide:
    """How one side of a comparison runs."""

    label: str
    _: KW_ONLY
    device: str = "auto"
    dtype: str = "auto"
    attn_kernel: str = "eager"
    input_path: str = "ids"
    head_first: int | None = None
    temporal_flat: bool = False  # --inject temporal-ids-flat: a video's temporal position ids set to 0 at prefill


@dataclass
class DiffArgs(ModelChoice):
    """Everything `qdebug diff` was asked for (the model: `ModelChoice`'s fields)."""

    first: str
    second: str
    _: KW_ONLY
    vary: str = "none"
    order: str = "image-first"
    inject: str | None = None
    a_dtype: str | None = None
    b_dtype: str | None = None
    max_new_tokens: int = 16
    atol: float | None = None
    rtol: float | None = None
    images: list[str] = field(default_factory=list)  # more images of the same request, after `first`
    onnx: str | None = None  # an export directory (or mapping file): B is that export in onnxruntime
    engine: str | None = None  # a vLLM server running qdebug's plugin: B is that engine's trace of the request
    engine_traces: str | None = None  # the folder that server writes its traces to
    served_model: str | None = None
    api_key_env: str | None = None
    timeout: float = 120.0
    fps: float | None = None  # a video's sampling rate (see `qdebug attn --fps`)
    max_frames: int | None = None


def is_trace_file(path: str) -> bool:
    """Whether an argument names a saved trace (a .qdt zip)."""
    import zipfile

    p = Path(path)
    return p.suffix == ".qdt" or (p.is_file() and zipfile.is_zipfile(p))


def diff_sides(args: DiffArgs) -> tuple[DiffSide, DiffSide]:
    """The A and B runs implied by --vary/--inject/--a-dtype/--b-dtype."""
    if args.vary not in VARY:
        raise InputError(f"--vary {args.vary}: expected one of {', '.join(VARY)}")
    a = DiffSide("A", device=args.device, dtype=args.dtype, attn_kernel=args.attn_kernel)
    b = DiffSide("B", device=args.device, dtype=args.dtype, attn_kernel=args.attn_kernel)
    if args.vary == "paths":
        a.label, b.label, b.input_path = "A token ids", "B inputs_embeds", "embeds"
    elif args.vary == "dtype":
        a.dtype, b.dtype = args.a_dtype or "float32", args.b_dtype or "bfloat16"
        a.label, b.label = f"A {a.dtype}", f"B {b.dtype}"
    elif args.vary == "attn":
        a.attn_kernel, b.attn_kernel = "eager", "sdpa"
        a.label, b.label = "A eager", "B sdpa"
    elif args.vary == "device":
        from qdebug.model.load import resolve_device, resolve_dtype

        a.device, b.device = "cpu", "cuda"
        # One change only: `--dtype auto` would give float32 on CPU and bfloat16 on CUDA, so both sides
        # take what CUDA resolves to (the user's own run); an explicit --dtype is kept on both.
        shared = resolve_dtype(args.dtype, resolve_device("cuda"))
        a.dtype = b.dtype = shared
        a.label, b.label = f"A cpu {shared}", f"B cuda {shared}"
    if args.vary != "dtype" and (args.a_dtype or args.b_dtype):
        a.dtype, b.dtype = args.a_dtype or a.dtype, args.b_dtype or b.dtype
        a.label, b.label = f"{a.label} {a.dtype}", f"{b.label} {b.dtype}"
    if args.inject:
        _apply_inject(args.inject, b)
    return a, b


def _apply_inject(inject: str, b: DiffSide) -> None:
    if inject == "mrope-text-only":
        b.input_path = "embeds-no-mrope"
        b.label += " (inputs_embeds without MRoPE ids)"
        return
    if inject.startswith("head-first:"):
        layer = inject.split(":", 1)[1]
        if not layer.isdigit():
            raise InputError(f"--inject {inject}: expected head-first:LAYER with LAYER a decoder layer index")
        b.head_first = int(layer)
        b.label += f" (head-first layout in layer {layer})"
        return
    if inject == "temporal-ids-flat":
        b.temporal_flat = True
        b.label += " (video temporal ids flat)"
        return
    raise InputError(f"--inject {inject}: expected mrope-text-only, head-first:LAYER or temporal-ids-flat")


def _requests(args: DiffArgs):
    from qdebug.trace.audio import is_audio_file
    from qdebug.trace.request import IMAGE_MARKER, build_request, load_image

    if args.order not in ORDERS:
        raise InputError(f"--order {args.order}: expected one of {', '.join(ORDERS)}")
    if is_audio_file(args.first):  # a clip, found by content: the 004 check (audio-first | text-first | both)
        from qdebug.commands.audio_input import audio_order_requests

        return audio_order_requests(args.first, args.second, args.order, args.max_new_tokens)
    from qdebug.trace.video_input import is_video_source

    if is_video_source(args.first):  # a frame folder or a video file: video first, or where `<video>` stands
        return _video_requests(args)
    if args.order == "audio-first":
        raise InputError(f"--order audio-first: {args.first} is not an audio clip; expected image-first, text-first or both for an image")
    paths = [args.first, *args.images]
    images = [load_image(p) for p in paths]
    orders = ["image-first", "text-first"] if args.order == "both" else [args.order]
    out = []
    for order in orders:
        prompt = args.second if order == "image-first" or IMAGE_MARKER in args.second else args.second + IMAGE_MARKER * len(paths)
        out.append((order, build_request(prompt, paths, images=images, max_new_tokens=args.max_new_tokens)))
    return out


def _video_requests(args: DiffArgs):
    """(order, request) for `diff VIDEO PROMPT`: the video first (image-first) and/or after the text (text-first)."""
    from qdebug.commands.video_input import check_video_model, split_videos, video_request
    from qdebug.trace.video_input import VIDEO_MARKER

    if args.order == "audio-first":
        raise InputError(f"--order audio-first: {args.first} is a video; expected image-first, text-first or both")
    check_video_model(args.model)
    _, videos = split_videos([Path(args.first), *map(Path, args.images)], [])
    orders = ["image-first", "text-first"] if args.order == "both" else [args.order]
    out = []
    for order in orders:
        prompt = args.second if order == "image-first" or VIDEO_MARKER in args.second else args.second + VIDEO_MARKER * len(videos)
        out.append((order, video_request(prompt, videos, args.max_new_tokens, args.fps, args.max_frames)))
    return out


def _trace(loaded, side: DiffSide, request):
    from qdebug.analysis.detectors.layout import LayoutWatch
    from qdebug.trace.layout_faults import HeadFirst
    from qdebug.trace.runner import RecordPolicy, prepare, trace_request

    prepared = prepare(loaded, request)
    n_layers = len(loaded.adapter.decoder_layers(loaded.model))
    if side.head_first is not None and not 0 <= side.head_first < n_layers:
        raise InputError(f"--inject head-first:{side.head_first}: expected a layer in 0..{n_layers - 1}")
    text = loaded.adapter.text_config(loaded.config)
    watch = LayoutWatch(int(text.num_attention_heads), int(text.num_key_value_heads), loaded.adapter.head_dim(loaded.config),
                        int(prepared.inputs["input_ids"].shape[1]))
    from qdebug.commands.linear_diff import linear_taps

    lin_taps, lin_watch, on_linear = linear_taps(loaded, side.head_first, int(prepared.inputs["input_ids"].shape[1]))
    taps = ([HeadFirst(side.head_first)] if side.head_first is not None and not on_linear else []) + [watch]
    # Every row of every layer is kept (the diff names the first row that parts); attention weights are a
    # side computation over the kept query rows, so each run keeps its own kernel everywhere.
    with lin_taps():
        faults = ()
        if side.temporal_flat:
            from qdebug.replay.faults import TemporalIdsFlat

            faults = (TemporalIdsFlat(),)
        trace = trace_request(loaded, request, RecordPolicy(keep_hidden=True), taps=tuple(taps), prepared=prepared, input_path=side.input_path,
                              faults=faults)
    from qdebug.analysis.detectors.deepstack import deepstack_findings

    deepstack = deepstack_findings(trace)  # e.g. an inputs_embeds path dropping the features
    return trace, watch.findings + (lin_watch.findings if lin_watch else []) + deepstack


def run_diff(args: DiffArgs, models: dict | None = None) -> DiffRun:
    """Run (or load) both sides and compare them. `models` caches loaded models across calls."""
    from qdebug.analysis.diff import diff_traces
    from qdebug.commands.common import loading, quiet_transformers
    from qdebug.trace.schema import load_trace

    if args.engine is not None or args.engine_traces is not None:
        if args.engine is None:
            raise InputError("--engine-traces DIR needs --engine URL: the server to send the request to (DIR is the folder it writes traces to)")
        if args.vary != "none" or args.inject or args.onnx or is_trace_file(args.first):
            raise InputError("--engine compares the engine with the local model on IMAGE PROMPT; expected no --vary, --inject, --onnx or trace files with it")
        from qdebug.commands.engine_diff import run_engine_diff

        return run_engine_diff(args, models)
    if args.onnx is not None:
        from qdebug.commands.onnx_diff import run_onnx_diff

        return DiffRun(run_onnx_diff(args, models))
    if is_trace_file(args.first) or is_trace_file(args.second):
        a, b = load_trace(args.first), load_trace(args.second)
        return DiffRun([Comparison("traces", diff_traces(a, b, atol=args.atol, rtol=args.rtol, a_label=args.first, b_label=args.second), a, b)])
    side_a, side_b = diff_sides(args)
    if side_b.head_first is not None:  # checked against config.json before any weights load
        from qdebug.model.limits import decoder_limits

        n = decoder_limits(args.model).num_layers
        if n is not None and side_b.head_first >= n:
            raise InputError(f"--inject head-first:{side_b.head_first}: expected a layer in 0..{n - 1} (the model has {n} decoder layers)")
    requests = _requests(args)
    from qdebug.commands.audio_input import check_modality

    check_modality(args.model, requests[0][1])
    quiet_transformers()
    from qdebug.model.load import load_model

    cache: dict = {} if models is None else models

    def model_for(side: DiffSide):
        key = (args.model, side.device, side.dtype, side.attn_kernel)
        if key not in cache:
            with loading(args.model):
                cache[key] = load_model(args.model, side.device, side.dtype, side.attn_kernel)
        return cache[key]

    results = []
    for order, request in requests:
        ta, fa = _trace(model_for(side_a), side_a, request)
        tb, fb = _trace(model_for(side_b), side_b, request)
        for f in fa:
            f.message = f"A: {f.message}"
        for f in fb:
            f.message = f"B: {f.message}"
        result = diff_traces(ta, tb, atol=args.atol, rtol=args.rtol, a_label=side_a.label, b_label=side_b.label, extra_findings=[*fa, *fb])
        results.append(Comparison(order, result, ta, tb))
    return DiffRun(results)


def write_diff_png(run: DiffRun, path) -> None:
    """The per-stage divergence plot: one panel, or one panel per order for --order both."""
    if len(run.comparisons) == 1:
        from qdebug.render.plots import diff_png

        diff_png(run.comparisons[0].result, path)
        return
    from qdebug.render.diff_orders_png import diff_orders_png

    diff_orders_png([(c.order, c.result) for c in run.comparisons], path)
