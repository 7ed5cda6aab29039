"""`qdebug diff IMAGE PROMPT --onnx DIR`: the PyTorch reference (A) against an ONNX export run in onnxruntime (B)."""

from __future__ import annotations

from qdebug.vocab import is_layer_stage, stage_number


def run_onnx_diff(args, models: dict | None = None) -> list:
    """One Comparison per order (A = the PyTorch reference trace, B = the export's). `models` caches loaded models."""
    from qdebug.analysis.diff import diff_traces
    from qdebug.analysis.onnx_findings import ONNX_TOLERANCE, explain_onnx, mark_unexposed
    from qdebug.commands.common import quiet_transformers
    from qdebug.commands.diff_inputs import diff_requests, is_trace_file
    from qdebug.commands.diff_run import Comparison
    from qdebug.errors import InputError
    from qdebug.export.as_trace import onnx_trace
    from qdebug.export.manifest import find_manifest
    from qdebug.export.ort_run import open_export, run_export
    from qdebug.trace.runner import RecordPolicy, prepare, trace_request
    from qdebug.vocab import FindingKind

    if args.vary != "none" or args.inject or args.a_dtype or args.b_dtype:
        raise InputError("--onnx compares the export with the PyTorch reference; expected no --vary, --inject, --a-dtype or --b-dtype with it")
    if args.dtype not in ("auto", "float32"):
        raise InputError(f"--dtype {args.dtype}: --onnx compares a float32 export with the float32 reference; expected auto or float32")
    if is_trace_file(args.first) or is_trace_file(args.second):
        raise InputError("--onnx runs a request: expected IMAGE PROMPT, not saved traces")
    manifest = find_manifest(args.onnx)  # refuse a bad export before loading any model
    requests = diff_requests(args)
    quiet_transformers()
    from qdebug.model.load import load_model

    cache: dict = {} if models is None else models
    key = (args.spec, args.device, "float32", args.attn_kernel)
    if key not in cache:
        # float32: what the export computes in; the reference must not be rounded coarser than it
        cache[key] = load_model(args.spec, args.device, "float32", args.attn_kernel)
    loaded = cache[key]
    opened = open_export(manifest, loaded, loaded.device)
    atol = args.atol if args.atol is not None else ONNX_TOLERANCE[0]
    rtol = args.rtol if args.rtol is not None else ONNX_TOLERANCE[1]
    results = []
    for order, request in requests:
        request.max_new_tokens = 1  # the export is a prefill graph: its first token is what both can say
        prepared = prepare(loaded, request)
        reference = trace_request(loaded, request, RecordPolicy(attn_layers=set(), keep_hidden=True), prepared=prepared)  # every row: the diff names the first that parts
        run = run_export(opened, loaded, prepared.inputs)
        exported = onnx_trace(reference, run, loaded.processor.tokenizer, str(manifest.root))
        result = diff_traces(reference, exported, atol=atol, rtol=rtol, a_label=f"A PyTorch {loaded.device}",
                             b_label=f"B ONNX {manifest.root.resolve().name} ({run.provider.removesuffix('ExecutionProvider')})")
        mark_unexposed(result, run.exposed)
        explained = explain_onnx(result, run)
        fd = result.first_divergence
        inputs_explain = any(f.kind in (FindingKind.DEEPSTACK, FindingKind.POSITION_IDS) for f in explained)  # the graph's inputs already say why
        if fd is not None and is_layer_stage(fd.name) and "prefill" in manifest.graphs and not inputs_explain:
            from qdebug.analysis.onnx_findings import explain_weights
            from qdebug.export.weights import layer_weight_layouts

            layer = stage_number(fd.name)
            explain_weights(result, layer, layer_weight_layouts(manifest.file("prefill"), loaded, layer))
        results.append(Comparison(order, result, reference, exported))
    return results
