"""`qdebug export onnx` + `qdebug diff --onnx`: a clean export agrees at every stage; each fault preset parts where it broke."""

import json

import pytest
import torch

from typer.testing import CliRunner

from qdebug.cli import app

from .conftest import IMAGE, PROMPT

runner = CliRunner()


def _diff(export, *extra):
    result = runner.invoke(app, ["diff", IMAGE, PROMPT, "--onnx", str(export), "--json", "-", *extra])
    return result, (json.loads(result.stdout) if result.stdout.strip().startswith("{") else None)


def test_export_writes_graphs_and_manifest(clean_export):
    out, done = clean_export
    assert sorted(p.name for p in out.iterdir()) == ["prefill.onnx", "qdebug-onnx.json", "vision.onnx"]
    manifest = json.loads((out / "qdebug-onnx.json").read_text())
    assert manifest["format"] == "qdebug-onnx-export" and manifest["version"] == 1 and manifest["opset"] >= 18
    assert manifest["model"]["architecture"] == "Qwen2VLForConditionalGeneration" and manifest["injected"] == []
    prefill = manifest["graphs"]["prefill"]
    assert set(prefill["inputs"]) == {"inputs_embeds", "position_ids", "attention_mask"}
    assert set(prefill["outputs"]) == {"logits", "layer.0", "layer.1", "layer.2", "layer.3"}
    assert manifest["graphs"]["vision"]["outputs"] == {"encode": "rows"}
    import onnx

    graph = onnx.load(str(out / "prefill.onnx")).graph
    assert [o.name for o in graph.output] == ["logits", "hidden_0", "hidden_1", "hidden_2", "hidden_3"]
    position = next(i for i in graph.input if i.name == "position_ids")
    assert len(position.type.tensor_type.shape.dim) == 3  # 3 × batch × seq MRoPE ids
    assert "wrote" in done.stderr and "qdebug-onnx.json" in done.stderr


def test_clean_export_agrees_at_every_stage(clean_export):
    result, data = _diff(clean_export[0])
    assert result.exit_code == 0, result.output
    assert data["first_divergence"] is None and data["texts_agree"]
    names = [s["name"] for s in data["stages"]]
    assert names == ["preprocess", "encode", "sync", "layer.0", "layer.1", "layer.2", "layer.3", "logits", "step.0"]
    for s in data["stages"][1:]:
        assert s["verdict"] == "ok" and s["max_abs"] < 1e-4 and s["cosine"] > 0.999999, s
    assert data["tolerance"] == {"atol": 1e-5, "rtol": 1e-4}
    step = data["steps"][0]
    assert step["agree"] and step["a_token"] == step["b_token"] and step["topk_overlap"] == 1.0
    assert [r["token_id"] for r in step["a_topk"]] == [r["token_id"] for r in step["b_topk"]]
    assert data["a"]["label"] == "A PyTorch cpu" and data["b"]["label"] == f"B ONNX {clean_export[0].name} (CPU)"


def test_report_shows_stages_and_first_token_side_by_side(clean_export):
    result = runner.invoke(app, ["diff", IMAGE, PROMPT, "--onnx", str(clean_export[0])])
    assert result.exit_code == 0
    for text in ("no stage beyond tolerance", "layer.3", "A top-k", "B top-k", "ONNX", "first token after prefill: top-k side by side"):
        assert text in result.stdout


def test_transposed_mlp_weight_parts_at_its_layer(transposed_export):
    result, data = _diff(transposed_export)
    assert result.exit_code == 1
    assert data["first_divergence"]["stage"] == "layer.2"
    verdicts = {s["name"]: s["verdict"] for s in data["stages"]}
    assert [verdicts[n] for n in ("encode", "sync", "layer.0", "layer.1")] == ["ok"] * 4
    assert all(verdicts[n] == "diverged" for n in ("layer.2", "layer.3", "logits"))
    finding = next(f for f in data["findings"] if f["kind"] == "export_layer")
    assert finding["stage"] == "layer.2" and "its input (layer.1) agrees" in finding["message"]
    # the demo's MLP has no square weight (128 ↔ 256): the export holds gate_proj's numbers in another order
    weights = [f for f in data["findings"] if f["kind"] == "export_weight"]
    assert [(f["layer"], f["severity"]) for f in weights] == [(2, "error")]
    assert "mlp.gate_proj.weight" in weights[0]["message"] and "another order" in weights[0]["message"]


def test_export_leaves_the_model_as_it_was(plain_demo, transposed_export):
    """The preset breaks the export only: the loaded model's weights are restored after exporting."""
    from safetensors.torch import load_file

    from qdebug.model.load import DEMO_DIR

    saved = load_file(str(DEMO_DIR / "model.safetensors"))
    name = next(k for k in saved if k.endswith("layers.2.mlp.gate_proj.weight"))
    live = plain_demo.adapter.decoder_layers(plain_demo.model)[2].mlp.gate_proj.weight
    assert torch.equal(live.detach(), saved[name])


def test_transposed_square_weight_parts_at_its_layer_and_is_named(transposed_square_export):
    result, data = _diff(transposed_square_export)
    assert result.exit_code == 1 and data["first_divergence"]["stage"] == "layer.1"
    weights = [f for f in data["findings"] if f["kind"] == "export_weight"]
    assert len(weights) == 1 and weights[0]["layer"] == 1
    assert "self_attn.q_proj.weight is stored as W while the same weight of the other 3 layer(s) is stored as Wᵀ" in weights[0]["message"]


def test_text_positions_part_at_sync_and_say_why(text_positions_export):
    result, data = _diff(text_positions_export)
    assert result.exit_code == 1
    assert data["first_divergence"]["stage"] == "sync"
    sync = next(s for s in data["stages"] if s["name"] == "sync")
    assert sync["max_abs"] < 1e-4  # the embeddings agree: only the position ids differ
    layer0 = next(s for s in data["stages"] if s["name"] == "layer.0")
    assert layer0["verdict"] == "diverged" and layer0["max_abs"] > 0.1
    why = [f for f in data["findings"] if f["kind"] == "position_ids"]
    assert any("B got plain 1-D text positions" in f["message"] for f in why)
    assert any("rank 2" in f["message"] and "layer.0 is the first stage computed with them" in f["message"] for f in why)


def test_dropped_deepstack_parts_where_the_additions_show(qwen3_dir, qwen3_no_deepstack):
    result, data = _diff(qwen3_no_deepstack, "--model", str(qwen3_dir))
    assert data is not None, result.output
    verdicts = {s["name"]: s["verdict"] for s in data["stages"]}
    assert [verdicts[n] for n in ("encode", "sync", "layer.0")] == ["ok"] * 3  # the export is exact up to the first addition
    assert data["first_divergence"]["stage"] == "layer.1" and data["first_divergence"]["token_kind"] == "image"
    finding = next(f for f in data["findings"] if f["kind"] == "deepstack")
    assert "takes none" in finding["message"] and "layer.1 is the first layer output computed from them" in finding["message"]
    assert not [f for f in data["findings"] if f["kind"] in ("export_weight", "export_layer")]  # the graph's inputs say why
    assert result.exit_code == 1


@pytest.mark.gpu
@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA device")
def test_reference_on_cuda_agrees_with_the_export(clean_export):
    result, data = _diff(clean_export[0], "--device", "cuda")
    assert data is not None, result.output
    assert data["a"]["label"] == "A PyTorch cuda"
    assert data["steps"][0]["agree"]
    assert all(s["cosine"] > 0.9999 for s in data["stages"][1:]), data["stages"]
