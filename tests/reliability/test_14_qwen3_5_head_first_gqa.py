"""Issue 21 item 17: `diff --inject head-first:1` on a Qwen3.5 whose linear-attention layers have fewer key than value
heads (the published geometry). The head-first tensors reach the gated-delta-rule kernel as seed 001's bug would hand
them; the kernel refuses them, and `diff` reports layer.1 as where the runs part, with the layout findings, never a
traceback."""

from __future__ import annotations

import json

import pytest

from .conftest import qdebug

IMAGE_PROMPT = "Describe the image."


def _qwen3_5(path, key_heads: int, value_heads: int):
    """A tiny random Qwen3.5: layers [linear, linear, linear, full] as the published checkpoints begin."""
    import torch
    from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration

    from tests.families.build import QWEN3_ROPE, QWEN3_VISION, _qwen3_processor, _text, _tokenizer, _vision_ids

    tok = _tokenizer()
    text = _text(tok, num_hidden_layers=4, head_dim=16, rope_parameters=dict(QWEN3_ROPE, partial_rotary_factor=1.0),
                 layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"],
                 linear_conv_kernel_dim=4, linear_key_head_dim=16, linear_value_head_dim=16,
                 linear_num_key_heads=key_heads, linear_num_value_heads=value_heads)
    config = Qwen3_5Config(text_config=text, vision_config=dict(QWEN3_VISION, out_hidden_size=64), **_vision_ids(tok))
    torch.manual_seed(0)
    Qwen3_5ForConditionalGeneration(config).save_pretrained(path)
    _qwen3_processor(tok, path)
    return path


@pytest.mark.parametrize("key_heads, value_heads", [(2, 4), (4, 4)])
def test_head_first_on_a_linear_layer_parts_at_that_layer(tmp_path, red_png, key_heads, value_heads):
    model = _qwen3_5(tmp_path / "qwen3_5", key_heads, value_heads)
    out = tmp_path / "d.json"
    proc = qdebug("diff", red_png, IMAGE_PROMPT, "--model", model, "--device", "cpu", "--inject", "head-first:1",
                  "--max-new-tokens", "3", "--json", out, timeout=600)
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["first_divergence"]["stage"] == "layer.1", doc["first_divergence"]
    verdicts = {s["name"]: s["verdict"] for s in doc["stages"]}
    assert verdicts["layer.0"] == verdicts["sync"] == "ok", verdicts
    layout = [f for f in doc["findings"] if f["kind"] == "layout"]
    assert layout and {f["layer"] for f in layout} == {1}, layout
    assert any("head-first [B,H,T,D]" in f["message"] and "chunk_gated_delta_rule" in f["message"] for f in layout), layout
    if key_heads < value_heads:  # the kernel refuses the head-first shapes: named beside the layout
        assert any("raised on that layout" in f["message"] and "must match" in f["message"] for f in layout), layout
