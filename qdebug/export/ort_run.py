"""Open an export (manifest + ONNX graphs) against a model, and run one prepared request through it in onnxruntime."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from qdebug.errors import ExportFormatError, ExportMismatchError, cause
from qdebug.trace.tensor_names import TensorKind as T, tensor_name
from qdebug.vocab import StageName, is_layer_stage, stage_number

from .build import deepstack_count, model_block
from .graphs import vision_precompute
from .manifest import Manifest

_NUMPY = {"tensor(float)": "float32", "tensor(float16)": "float16", "tensor(double)": "float64", "tensor(int64)": "int64",
          "tensor(int32)": "int32", "tensor(bool)": "bool", "tensor(bfloat16)": "float32"}


@dataclass
class OpenExport:
    """onnxruntime sessions of an export's graphs, checked against the model."""

    manifest: Manifest
    sessions: dict  # graph name → InferenceSession
    provider: str
    inputs: dict = field(default_factory=dict)  # graph → {name: (type, shape)}
    outputs: dict = field(default_factory=dict)


@dataclass
class OnnxRun:
    """What the export computed for one request, as CPU tensors keyed like a trace, plus what it was fed."""

    tensors: dict
    exposed: list[str]  # canonical stages the export's graphs expose
    position_input: str  # "mrope" (3 × 1 × S) | "text" (1 × S) | "none": what the graph's position_ids input takes
    position_shape: list | None
    deepstack_model: int  # deepstack feature sets the model's vision tower makes
    deepstack_fed: bool  # whether the prefill graph takes them
    dtype: str
    provider: str


def _session(path, providers, threads: int | None = None):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 4  # fatal only: a refused run is reported as one qdebug line, not ORT's own as well
    if threads:
        opts.intra_op_num_threads = threads
    try:
        return ort.InferenceSession(str(path), sess_options=opts, providers=providers)
    except Exception as exc:  # onnxruntime raises its own types for unreadable or invalid models
        raise ExportFormatError(f"{path}: not a loadable ONNX model ({cause(exc)[:200]}); expected an ONNX graph") from None


def open_export(manifest: Manifest, loaded, device: str, threads: int | None = None) -> OpenExport:
    """Load the graphs (CUDA provider when the model runs on CUDA and onnxruntime has it) and check the mapping and
    the model: ExportFormatError for a graph that is not what the manifest says, ExportMismatchError for another model."""
    import onnxruntime as ort

    _check_model(manifest, loaded)
    cuda = device.startswith("cuda") and "CUDAExecutionProvider" in ort.get_available_providers()
    providers = (["CUDAExecutionProvider"] if cuda else []) + ["CPUExecutionProvider"]
    opened = OpenExport(manifest, {}, providers[0])
    for name, graph in manifest.graphs.items():
        path = manifest.file(name)
        if not path.is_file():
            raise ExportFormatError(f"{manifest.path}: graphs.{name}.file {graph.file!r} not found next to it; expected an ONNX file")
        sess = _session(path, providers, threads)
        ins = {i.name: (i.type, i.shape) for i in sess.get_inputs()}
        outs = {o.name: (o.type, o.shape) for o in sess.get_outputs()}
        for role, tensor in graph.inputs.items():
            if tensor not in ins:
                raise ExportFormatError(f"{path}: has no input {tensor!r} (mapped as {role}); its inputs are {', '.join(ins)} — not the graph the manifest describes")
        for role, tensor in graph.outputs.items():
            if tensor not in outs:
                raise ExportFormatError(f"{path}: has no output {tensor!r} (mapped as {role}); its outputs are {', '.join(outs)} — not the graph the manifest describes")
        unmapped = [n for n in ins if n not in graph.inputs.values()]
        if unmapped:
            raise ExportFormatError(f"{path}: input(s) {', '.join(unmapped)} not mapped in {manifest.path.name}; expected every graph input named by a role")
        opened.sessions[name], opened.inputs[name], opened.outputs[name] = sess, ins, outs
    _check_shapes(opened, loaded)
    return opened


def _check_model(manifest: Manifest, loaded) -> None:
    if not manifest.model:
        return
    have = model_block(loaded)
    keys = [k for k in ("architecture", "layers", "hidden", "vocab") if k in manifest.model]
    for k in keys:  # a value of the wrong type is a broken manifest, not another model
        if _word(manifest.model[k]) != _word(have[k]):
            raise ExportFormatError(f"{manifest.path}: model.{k} is {_shown(manifest.model[k])} ({_word(manifest.model[k])}); "
                                    f"expected {_word(have[k])}, as in this model's {_shown(have[k])}")
    wrong = [f"{k} {_shown(manifest.model[k])} vs {_shown(have[k])}" for k in keys if manifest.model[k] != have[k]]
    if wrong:
        raise ExportMismatchError(f"{manifest.path}: the export was made from another model than --model {loaded.spec} ({', '.join(wrong)}); expected an export of this model")


def _shown(value) -> str:
    """A manifest value as written in its JSON."""
    import json

    return json.dumps(value, ensure_ascii=False)[:60]


def _word(value) -> str:
    """A JSON value's kind in a user's words."""
    return ("text" if isinstance(value, str) else "true/false" if isinstance(value, bool) else "a number" if isinstance(value, int | float)
            else "null" if value is None else "a list" if isinstance(value, list) else "an object")


def _check_shapes(opened: OpenExport, loaded) -> None:
    have = model_block(loaded)
    m = opened.manifest
    checks = []
    if "prefill" in m.graphs:
        graph = m.graphs["prefill"]
        checks.append(("prefill", opened.inputs["prefill"][graph.inputs["inputs_embeds"]][1], have["hidden"], "inputs_embeds width"))
        checks.append(("prefill", opened.outputs["prefill"][graph.outputs[StageName.LOGITS]][1], have["vocab"], "logits width (vocabulary)"))
        for role in graph.outputs:
            if is_layer_stage(role) and stage_number(role) >= have["layers"]:
                raise ExportMismatchError(f"{m.path}: maps {role} but --model {loaded.spec} has decoder layers 0..{have['layers'] - 1}")
            if is_layer_stage(role):
                checks.append(("prefill", opened.outputs["prefill"][graph.outputs[role]][1], have["hidden"], f"{role} width"))
    if "vision" in m.graphs:
        checks.append(("vision", opened.outputs["vision"][m.graphs["vision"].outputs[StageName.ENCODE]][1], have["hidden"], "encode rows width"))
    for graph_name, shape, want, what in checks:
        last = shape[-1] if shape else None
        if isinstance(last, int) and last != want:
            raise ExportMismatchError(f"{m.file(graph_name)}: {what} is {last}, --model {loaded.spec} has {want}; expected an export of this model")


def _feed(sess_inputs: dict, name: str, tensor):
    import numpy as np

    kind = _NUMPY.get(sess_inputs[name][0])
    if kind is None:
        raise ExportFormatError(f"graph input {name!r} has type {sess_inputs[name][0]}; expected a float, int or bool tensor")
    return np.ascontiguousarray(tensor.detach().cpu().numpy().astype(kind))


def _rows(array):
    """A graph output as a CPU float tensor without its batch dim (1 × S × D → S × D)."""
    import torch

    t = torch.from_numpy(array).float()
    return t[0] if t.ndim == 3 and t.shape[0] == 1 else t


def run_export(opened: OpenExport, loaded, inputs: dict) -> OnnxRun:
    """Feed one request (the processor's `inputs`) through the export: vision per image, the merge into token
    embeddings, then prefill. Every tensor comes back to CPU here."""
    import torch

    m, model, adapter = opened.manifest, loaded.model, loaded.adapter
    tensors: dict = {}
    exposed: list[str] = [StageName.SYNC]
    ids = inputs["input_ids"].cpu()
    image_mask = ids[0] == adapter.image_token_id(loaded.config)
    rows_all, deep_all = None, []
    if "vision" in m.graphs and inputs.get("pixel_values") is not None:
        graph, sess, ins = m.graphs["vision"], opened.sessions["vision"], opened.inputs["vision"]
        visual = adapter.vision_tower(model)
        grids, start, chunks, deep_chunks = inputs["image_grid_thw"].cpu(), 0, [], []
        for i, grid in enumerate(grids):
            n = int(grid.prod())
            values = {"pixel_values": inputs["pixel_values"][start : start + n], "image_grid_thw": grid[None]}
            values.update(vision_precompute(visual, grid[None]))
            start += n
            feed = {tensor: _feed(ins, tensor, values[role]) for role, tensor in graph.inputs.items()}
            out = _run(sess, feed, m.file("vision"), f"image {i}")
            chunks.append(_rows(out[graph.outputs[StageName.ENCODE]]))
            tensors[tensor_name(T.ENCODE, item=i)] = chunks[-1]
            deep_chunks.append([_rows(out[graph.outputs[f"deepstack.{k}"]]) for k in range(_count(graph.outputs, "deepstack"))])
        rows_all = torch.cat(chunks)
        deep_all = [torch.cat(parts) for parts in zip(*deep_chunks)] if deep_chunks and deep_chunks[0] else []
        exposed.append(StageName.ENCODE)

    with torch.no_grad():
        embeds = adapter.embed_tokens(model)(ids.to(loaded.device))[0].float().cpu()
    if rows_all is not None and int(image_mask.sum()) == rows_all.shape[0]:
        embeds[image_mask] = rows_all.to(embeds.dtype)  # the merge a pipeline does between the two graphs
    elif rows_all is None and inputs.get("pixel_values") is not None:
        with torch.no_grad():  # no vision graph: the export receives the reference's merged embeddings
            embeds = adapter.merged_embeddings(model, {k: (v.to(loaded.device) if hasattr(v, "to") else v) for k, v in inputs.items()})[0].float().cpu()
    tensors[tensor_name(T.SYNC_EMBEDS)] = embeds

    position_input, position_shape, deepstack_fed, dtype = "none", None, False, "float32"
    if "prefill" in m.graphs:
        graph, sess, ins = m.graphs["prefill"], opened.sessions["prefill"], opened.inputs["prefill"]
        dtype = _NUMPY[ins[graph.inputs["inputs_embeds"]][0]]
        seq = ids.shape[1]
        values = {"inputs_embeds": embeds[None], "attention_mask": torch.ones(1, seq, dtype=torch.int64), "visual_pos_masks": image_mask[None]}
        if "position_ids" in graph.inputs:
            position_shape = list(ins[graph.inputs["position_ids"]][1])
            if len(position_shape) == 2:  # 1 × S: the graph takes 1-D text positions
                position_input = "text"
                values["position_ids"] = torch.arange(seq)[None]
                tensors[tensor_name(T.SYNC_POSITION_IDS)] = values["position_ids"].expand(3, seq).clone()
            else:
                position_input = "mrope"
                mrope, _ = adapter.media_rope_index(model, {k: (v.to(loaded.device) if hasattr(v, "to") else v) for k, v in inputs.items()}) \
                    if inputs.get("image_grid_thw") is not None else (torch.arange(seq).view(1, 1, -1).expand(3, 1, seq), None)
                values["position_ids"] = mrope.cpu()
                tensors[tensor_name(T.SYNC_POSITION_IDS)] = values["position_ids"][:, 0].clone()
        for k, rows in enumerate(deep_all):
            values[f"deepstack.{k}"] = rows
        deepstack_fed = any(r.startswith("deepstack.") for r in graph.inputs)
        missing = [r for r in graph.inputs if r not in values]
        if missing:
            raise ExportFormatError(f"{m.file('prefill')}: needs {', '.join(missing)} but the request produced none (no vision graph output for it)")
        feed = {tensor: _feed(ins, tensor, values[role]) for role, tensor in graph.inputs.items()}
        out = _run(sess, feed, m.file("prefill"), f"{seq} tokens")
        logits = _rows(out[graph.outputs[StageName.LOGITS]])
        tensors[tensor_name(T.STEP_LOGITS, step=0)] = logits[-1] if logits.ndim == 2 else logits
        exposed.append(StageName.LOGITS)
        for role, tensor in graph.outputs.items():
            if is_layer_stage(role):
                tensors[tensor_name(T.LAYER_HIDDEN, layer=stage_number(role))] = _rows(out[tensor])
                exposed.append(role)
    return OnnxRun(tensors, exposed, position_input, position_shape, deepstack_count(loaded), deepstack_fed, dtype, opened.provider)


def _run(sess, feed: dict, file, what: str) -> dict:
    """Outputs by name of one session run; ExportFormatError (one line) when ONNX Runtime refuses the graph at run time,
    e.g. symbolic dimensions that do not agree for this request (a MatMul dimension mismatch)."""
    try:
        return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feed)))
    except Exception as exc:  # onnxruntime raises its own types (Fail, InvalidArgument, RuntimeException)
        why = re.sub(r"^\[ONNXRuntimeError\] : \d+ : \w+ : ", "", " ".join(cause(exc).split()))[:300]
        raise ExportFormatError(f"{file}: ONNX Runtime could not run it on this request ({what}): {why}; "
                                "expected a graph whose shapes fit the model it is compared with") from None


def _count(roles: dict, prefix: str) -> int:
    return sum(1 for r in roles if re.fullmatch(re.escape(prefix) + r"\.\d+", r))
