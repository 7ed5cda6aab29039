"""`qdebug diff`: run (or load) two traces that should agree and find the first stage where they part."""

from __future__ import annotations

from qdebug.errors import InputError

from .diff_args import DiffArgs
from .diff_inputs import diff_requests, is_trace_file
from .diff_run import Comparison, DiffRun
from .diff_side import DiffSide, trace_side

VARY = ("none", "paths", "dtype", "attn", "device")


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
    """Plant the registered preset `inject` names in B (`replay/fault_registry.py`): its label, input path, fault."""
    from qdebug.replay.fault_registry import Command, parse_inject

    b.inject = parse_inject(inject, Command.DIFF)
    if b.inject is None:
        return
    b.label += f" ({b.inject.label})"
    b.input_path = b.inject.preset.input_path or b.input_path


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
    if side_b.inject is not None:  # checked against config.json before any weights load
        side_b.inject.check_model(args.spec)
    requests = diff_requests(args)
    quiet_transformers()
    from qdebug.model.load import load_model

    cache: dict = {} if models is None else models

    def model_for(side: DiffSide):
        key = (args.model, side.device, side.dtype, side.attn_kernel)
        if key not in cache:
            with loading(args.spec):
                cache[key] = load_model(args.spec, side.device, side.dtype, side.attn_kernel)
        return cache[key]

    results = []
    for order, request in requests:
        ta, fa = trace_side(model_for(side_a), side_a, request)
        tb, fb = trace_side(model_for(side_b), side_b, request)
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
