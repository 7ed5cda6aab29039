"""`export_onnx(loaded, out)`: the model as two ONNX graphs (vision encoder, LM prefill) plus the manifest."""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings
from pathlib import Path

from qdebug import strict_json
from qdebug.atomic import temp_stem
from qdebug.errors import InputError, QDebugError, cause, text_lines
from qdebug.vocab import StageName, layer_stage

from .graphs import PrefillGraph, VisionGraph, vision_precompute
from .inject import Injects, transposed_weights
from .manifest import MANIFEST_NAME, Manifest, ManifestGraph

VISION_FILE, PREFILL_FILE = "vision.onnx", "prefill.onnx"


def deepstack_count(loaded) -> int:
    """How many deepstack feature sets the vision tower hands the decoder (0 before Qwen3-VL)."""
    return len(getattr(loaded.adapter.vision_tower(loaded.model), "deepstack_visual_indexes", None) or [])


def model_block(loaded) -> dict:
    """What the manifest records of the model, checked again when the export is compared."""
    text = loaded.adapter.text_config(loaded.config)
    return {"spec": loaded.spec, "architecture": loaded.adapter.name, "layers": len(loaded.adapter.decoder_layers(loaded.model)),
            "hidden": int(text.hidden_size), "vocab": int(text.vocab_size), "deepstack": deepstack_count(loaded), "dtype": loaded.dtype}


def sample_inputs(loaded):
    """A small request (one synthetic 112×112 image) to trace the graphs with; shapes stay dynamic."""
    from PIL import Image

    from qdebug.trace.request import build_request
    from qdebug.trace.runner import prepare

    image = Image.new("RGB", (112, 112), (90, 140, 200))
    return prepare(loaded, build_request("Describe the image.", [], images=[image], max_new_tokens=1)).inputs


def _export(module, args, path: Path, input_names, output_names, dynamic_shapes, opset: int | None, what: str) -> None:
    import torch

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = torch.onnx.export(module, tuple(args), dynamo=True, input_names=list(input_names), output_names=list(output_names),
                                        dynamic_shapes=tuple(dynamic_shapes), opset_version=opset, verbose=False)
            assert program is not None  # dynamo=True returns the program (None is the old exporter's, given a file)
            program.save(str(path))
    except Exception as exc:  # torch.export / onnxscript raise many types; all mean "this graph did not export"
        raise QDebugError(f"torch.onnx.export of the {what} graph failed ({_summary(exc)})") from None


def _summary(exc: Exception) -> str:
    """The one line of an exporter error that names the cause (torch.onnx wraps it in a long report)."""
    lines = text_lines(exc)
    if "## Exception summary" in lines[:-1]:
        return lines[lines.index("## Exception summary") + 1][:300]
    return cause(exc)[:300]


def _dims(tensor, named: dict[int, object]) -> dict:
    """Dynamic dims of a tensor: each dim whose sample size is a known dynamic size."""
    return {i: named[s] for i, s in enumerate(tensor.shape) if s in named}


def export_onnx(loaded, out: Path, injects: Injects, opset: int | None = None) -> Manifest:
    """Export `loaded` into the new directory `out` (written whole or not at all) and return its manifest."""
    import onnx
    import torch

    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(f"--out {out}: exists and is not an empty directory; expected a new or empty directory")
    inputs = sample_inputs(loaded)
    model, adapter = loaded.model, loaded.adapter
    visual = adapter.vision_tower(model)
    n_deep = deepstack_count(loaded)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{temp_stem(out, 10)}.", dir=out.parent))
    try:
        with torch.no_grad(), transposed_weights(model, adapter, injects):
            # vision: one image per call
            grid = inputs["image_grid_thw"][:1]
            pre = vision_precompute(visual, grid)
            patches = torch.export.Dim("patches", min=4, max=1 << 16)
            pv = inputs["pixel_values"]
            vision = VisionGraph(visual, tuple(pre)).eval()
            v_out = ["rows", *[f"deepstack_{k}" for k in range(n_deep)]]
            shapes = [{0: patches}, tuple(_dims(t, {pv.shape[0]: patches}) for t in pre.values())]  # *extra is one tuple
            skipped = {}
            try:
                _export(vision, (pv, *pre.values()), tmp / VISION_FILE, ["pixel_values", *pre], v_out, shapes, opset, "vision")
            except QDebugError as exc:
                # e.g. Qwen2.5-VL's windowed vision attention splits by data-dependent window lengths; the prefill
                # graph is still worth comparing (it then receives the reference's merged embeddings)
                skipped["vision"] = exc.message
                (tmp / VISION_FILE).unlink(missing_ok=True)
            reference = visual(pv, grid_thw=grid)
            rows = (reference.pooler_output, *(getattr(reference, "deepstack_features", None) or []))

            # prefill: merged embeddings + MRoPE ids (+ deepstack) → logits and every layer's output
            embeds = adapter.merged_embeddings(model, inputs)
            mrope, _ = adapter.media_rope_index(model, inputs)  # the family's own position function (by name: Omni's differs)
            seq = torch.export.Dim("seq", min=2, max=1 << 15)
            positions = torch.arange(embeds.shape[1])[None] if injects.text_positions else mrope
            args, names, shapes = [embeds, positions, inputs["attention_mask"]], ["inputs_embeds", "position_ids", "attention_mask"], [{1: seq}, {positions.ndim - 1: seq}, {1: seq}]
            if n_deep and not injects.drop_deepstack:
                image_rows = torch.export.Dim("image_rows", min=1, max=1 << 15)
                args += [inputs["input_ids"] == adapter.image_token_id(loaded.config), *rows[1:]]
                names += ["visual_pos_masks", *[f"deepstack_{k}" for k in range(n_deep)]]
                shapes.append(({1: seq}, *[{0: image_rows}] * n_deep))  # *deepstack is one tuple
            prefill = PrefillGraph(model, adapter, n_deep, injects.text_positions, injects.drop_deepstack).eval()
            n_layers = len(adapter.decoder_layers(model))
            p_out = ["logits", *[f"hidden_{i}" for i in range(n_layers)]]
            _export(prefill, args, tmp / PREFILL_FILE, names, p_out, shapes, opset, "prefill")

        opsets = {imp.domain or "ai.onnx": imp.version for imp in onnx.load(str(tmp / PREFILL_FILE), load_external_data=False).opset_import}
        graphs = {
            "vision": ManifestGraph(VISION_FILE, {"pixel_values": "pixel_values", **{k: k for k in pre}},
                                {StageName.ENCODE: "rows", **{f"deepstack.{k}": f"deepstack_{k}" for k in range(n_deep)}}),
            "prefill": ManifestGraph(PREFILL_FILE, {n.replace("deepstack_", "deepstack."): n for n in names},
                                 {StageName.LOGITS: "logits", **{layer_stage(i): f"hidden_{i}" for i in range(n_layers)}}),
        }
        extra = {"opset": opsets.get("ai.onnx"), "exporter": f"torch.onnx.export(dynamo=True), torch {torch.__version__}",
                 "injected": injects.names}
        if skipped:
            extra["not_exported"] = skipped
            graphs = {k: v for k, v in graphs.items() if k not in skipped}
        manifest = Manifest(graphs=graphs, model=model_block(loaded), extra=extra)
        (tmp / MANIFEST_NAME).write_text(strict_json.dumps(manifest.to_json(), indent=1) + "\n")
        os.chmod(tmp, 0o777 & ~_umask())
        if out.exists():
            out.rmdir()  # empty (checked above); replaced by the finished directory
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    manifest.root, manifest.path = out, out / MANIFEST_NAME
    return manifest


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask

