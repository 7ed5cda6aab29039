"""User exports described by a mapping file; ONNX files that are not a qdebug export, or not of this model, are refused."""

import json
import shutil

import pytest
from typer.testing import CliRunner

from qdebug.cli import app

from .conftest import IMAGE, PROMPT

runner = CliRunner()


def _renamed_prefill(src, dst, names: dict):
    """The demo's prefill graph with its inputs/outputs renamed, as a user's own export script might name them."""
    import onnx

    model = onnx.load(str(src))
    for node in model.graph.node:
        node.input[:] = [names.get(n, n) for n in node.input]
        node.output[:] = [names.get(n, n) for n in node.output]
    for value in (*model.graph.input, *model.graph.output):
        value.name = names.get(value.name, value.name)
    onnx.save(model, str(dst))


def test_user_export_with_a_mapping_file_compares_what_it_exposes(clean_export, tmp_path):
    names = {"inputs_embeds": "embeds", "position_ids": "mrope_ids", "attention_mask": "mask", "logits": "out_logits", "hidden_1": "block1"}
    _renamed_prefill(clean_export[0] / "prefill.onnx", tmp_path / "decoder_model.onnx", names)
    mapping = {"format": "qdebug-onnx-export", "version": 1, "graphs": {"prefill": {
        "file": "decoder_model.onnx", "inputs": {"inputs_embeds": "embeds", "position_ids": "mrope_ids", "attention_mask": "mask"},
        "outputs": {"logits": "out_logits", "layer.1": "block1"}}}}
    (tmp_path / "my-map.json").write_text(json.dumps(mapping))
    result = runner.invoke(app, ["diff", IMAGE, PROMPT, "--onnx", str(tmp_path / "my-map.json"), "--json", "-"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    verdicts = {s["name"]: s["verdict"] for s in data["stages"]}
    assert verdicts == {"preprocess": "ok", "encode": "missing", "sync": "ok", "layer.0": "missing", "layer.1": "ok",
                        "layer.2": "missing", "layer.3": "missing", "logits": "ok", "step.0": "ok"}
    assert next(s for s in data["stages"] if s["name"] == "layer.2")["detail"] == "not exposed by the export's graphs"
    assert data["first_divergence"] is None and data["steps"][0]["agree"]


def _refused(args, code, expect):
    result = runner.invoke(app, args)
    assert result.exit_code == code, result.output
    err = result.stderr.strip()
    assert len(err.splitlines()) == 1 and err.startswith("qdebug: error: ") and expect in err, err
    assert "Traceback" not in result.output


def test_bare_and_unmapped_onnx_files_are_refused(clean_export, tmp_path):
    _refused(["diff", IMAGE, PROMPT, "--onnx", str(clean_export[0] / "prefill.onnx")], 2, "not a qdebug export")
    shutil.copy(clean_export[0] / "prefill.onnx", tmp_path / "model.onnx")
    _refused(["diff", IMAGE, PROMPT, "--onnx", str(tmp_path)], 2, "no qdebug-onnx.json")
    _refused(["diff", IMAGE, PROMPT, "--onnx", str(tmp_path / "nowhere")], 2, "no such file or directory")


@pytest.mark.parametrize("edit, expect", [
    (lambda m: m.update(format="something-else"), "not a qdebug ONNX manifest"),
    (lambda m: m.update(version=7), "manifest version 7"),
    (lambda m: m["graphs"]["prefill"]["outputs"].update({"layer.x": "hidden_0"}), "unknown stage 'layer.x'"),
    (lambda m: m["graphs"]["prefill"].update(file="vision.onnx"), "not the graph the manifest describes"),
    (lambda m: m["graphs"]["prefill"]["inputs"].pop("attention_mask"), "input(s) attention_mask not mapped"),
    (lambda m: m["graphs"]["prefill"].update(file="qdebug-onnx.json"), "not a loadable ONNX model"),
])
def test_broken_manifests_are_refused(clean_export, tmp_path, edit, expect):
    export = tmp_path / "export"
    shutil.copytree(clean_export[0], export)
    manifest = json.loads((export / "qdebug-onnx.json").read_text())
    edit(manifest)
    (export / "qdebug-onnx.json").write_text(json.dumps(manifest))
    _refused(["diff", IMAGE, PROMPT, "--onnx", str(export)], 2, expect)


def test_export_of_another_model_is_refused(clean_export, qwen3_no_deepstack, tmp_path):
    _refused(["diff", IMAGE, PROMPT, "--onnx", str(qwen3_no_deepstack)], 5, "made from another model than --model demo")
    # a user mapping with no model block: the graph's own shapes give it away
    shutil.copy(qwen3_no_deepstack / "prefill.onnx", tmp_path / "decoder.onnx")
    mapping = json.loads((qwen3_no_deepstack / "qdebug-onnx.json").read_text())
    (tmp_path / "qdebug-onnx.json").write_text(json.dumps({"format": mapping["format"], "version": 1, "graphs": {"prefill": {**mapping["graphs"]["prefill"], "file": "decoder.onnx"}}}))
    _refused(["diff", IMAGE, PROMPT, "--onnx", str(tmp_path)], 5, "inputs_embeds width is 64, --model demo has 128")


def test_onnx_with_other_comparisons_is_refused(clean_export):
    _refused(["diff", IMAGE, PROMPT, "--onnx", str(clean_export[0]), "--vary", "dtype"], 2, "--onnx compares the export")
    _refused(["diff", IMAGE, PROMPT, "--onnx", str(clean_export[0]), "--dtype", "bfloat16"], 2, "--dtype bfloat16")


def test_export_refuses_bad_options_and_leaves_nothing(tmp_path):
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "keep.txt").write_text("mine")
    _refused(["export", "onnx", "--out", str(taken)], 2, "not an empty directory")
    assert [p.name for p in taken.iterdir()] == ["keep.txt"]
    for inject, expect in (("transpose-weight:layer.9.mlp", "decoder layers 0..3"), ("drop-deepstack", "no deepstack features"),
                           ("swap-heads", "expected one of transpose-weight:layer.L.mlp")):
        _refused(["export", "onnx", "--out", str(tmp_path / "new"), "--inject", inject], 2, expect)
        assert not (tmp_path / "new").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]  # no temporary directory left behind


def test_unexportable_vision_graph_leaves_the_prefill_to_compare(tmp_path):
    """Qwen2.5-VL's windowed vision attention does not trace: the export says so and the prefill graph is still compared."""
    import torch
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration, Qwen2_5_VLProcessor, Qwen2VLImageProcessor, Qwen2VLVideoProcessor

    from qdebug.demo.build import MAX_PIXELS, MIN_PIXELS
    from qdebug.demo.vocab import build_tokenizer

    tok = build_tokenizer()
    ids = tok.convert_tokens_to_ids
    config = Qwen2_5_VLConfig(
        text_config=dict(vocab_size=80, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]},
                         bos_token_id=ids("<|endoftext|>"), eos_token_id=ids("<|im_end|>"), pad_token_id=ids("<|endoftext|>")),
        vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64, patch_size=14,
                           spatial_merge_size=2, temporal_patch_size=2, window_size=56, fullatt_block_indexes=[1]),
        image_token_id=ids("<|image_pad|>"), video_token_id=ids("<|video_pad|>"),
        vision_start_token_id=ids("<|vision_start|>"), vision_end_token_id=ids("<|vision_end|>"),
    )
    torch.manual_seed(0)
    model_dir = tmp_path / "qwen25"
    Qwen2_5_VLForConditionalGeneration(config).save_pretrained(model_dir)
    Qwen2_5_VLProcessor(image_processor=Qwen2VLImageProcessor(min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS), tokenizer=tok,
                        video_processor=Qwen2VLVideoProcessor(), chat_template=tok.chat_template).save_pretrained(model_dir)
    out = tmp_path / "export"
    done = runner.invoke(app, ["export", "onnx", "--model", str(model_dir), "--out", str(out)])
    assert done.exit_code == 0, done.output
    assert "not exported: the vision graph" in done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["prefill.onnx", "qdebug-onnx.json"]
    manifest = json.loads((out / "qdebug-onnx.json").read_text())
    assert list(manifest["graphs"]) == ["prefill"] and "vision" in manifest["not_exported"]
    result = runner.invoke(app, ["diff", IMAGE, PROMPT, "--onnx", str(out), "--model", str(model_dir), "--json", "-"])
    assert result.exit_code == 0, result.output
    verdicts = {s["name"]: s["verdict"] for s in json.loads(result.stdout)["stages"]}
    assert verdicts["encode"] == "missing" and verdicts["layer.1"] == "ok" and verdicts["logits"] == "ok"
