"""Qwen3.5 (hybrid: gated-delta-rule linear attention + softmax attention) on a tiny random checkpoint."""

import json
from pathlib import Path

import torch
from typer.testing import CliRunner

from qdebug.cli import app
from qdebug.commands.diff import DiffArgs, run_diff
from qdebug.trace.request import build_request
from qdebug.trace.runner import trace_request
from tests.conftest import scene

IMAGE = str(Path(__file__).resolve().parents[2] / "sample_data" / "red_circle_top_left.png")
runner = CliRunner()


def _trace(loaded, tokens=3):
    return trace_request(loaded, build_request("Describe the image.", [], images=[scene(3, width=112, height=168).image], max_new_tokens=tokens))


def test_linear_layers_record_layout_gates_and_state_norms(family_model):
    loaded = family_model("qwen3_5")
    trace = _trace(loaded)
    assert trace.meta.layer_types == ["linear_attention", "full_attention", "linear_attention", "full_attention"]
    for layer in (0, 2):
        stage = trace.stages[f"layer.{layer}"]
        info = stage.summary.linear_attention
        t = len(trace.input_ids)
        assert stage.summary.kind == "linear_attention" and info["kernel"] == "chunk_gated_delta_rule"
        assert info["query_shape"] == info["key_shape"] == info["value_shape"] == [1, t, 4, 16]
        assert info["g_shape"] == info["beta_shape"] == [1, t, 4]
        assert info["g"]["max"] < 0 and 0 < info["beta"]["min"] <= info["beta"]["max"] < 1  # log-decay < 0, beta a sigmoid
        norms = trace.tensors[f"layer.{layer}.state_norm"]
        assert norms.shape == (3, 4) and bool((norms > 0).all())  # prefill + 2 decode steps, one norm per value head
        assert f"layer.{layer}.attn" not in trace.tensors  # no attention matrix exists there
    assert {"layer.1.attn", "layer.3.attn"} <= set(trace.tensors)
    names = [c.name for c in trace.stages["sync"].checks]
    assert "MRoPE position ids == get_rope_index" in names and "4-row position ids: text row == 1-D text positions" in names
    assert trace.stages["sync"].ok


def test_head_first_on_a_linear_layer_names_layer_kernel_and_layout(family_dir):
    ((_, result, _, _),) = run_diff(DiffArgs(IMAGE, "Describe the image.", inject="head-first:2", model=str(family_dir("qwen3_5")),
                                             device="cpu", max_new_tokens=3)).comparisons
    assert result.first_divergence.name == "layer.2"
    verdicts = {s.name: s.verdict for s in result.stages}
    assert verdicts["layer.0"] == verdicts["layer.1"] == verdicts["sync"] == "ok"
    layout = [f for f in result.findings if f.kind == "layout"]
    assert layout and {f.layer for f in layout} == {2}
    assert "chunk_gated_delta_rule" in layout[0].message and "head-first [B,H,T,D]" in layout[0].message


def test_head_first_on_a_full_attention_layer_still_uses_the_attention_fault(family_dir):
    ((_, result, _, _),) = run_diff(DiffArgs(IMAGE, "Describe the image.", inject="head-first:1", model=str(family_dir("qwen3_5")),
                                             device="cpu", max_new_tokens=3)).comparisons
    assert result.first_divergence.name == "layer.1"
    layout = [f for f in result.findings if f.kind == "layout"]
    assert layout and {f.layer for f in layout} == {1} and "swapped" in layout[0].message


def test_attn_json_names_layer_kinds(family_dir, tmp_path):
    out = tmp_path / "r.json"
    res = runner.invoke(app, ["attn", IMAGE, "Describe the image.", "--model", str(family_dir("qwen3_5")), "--device", "cpu",
                              "--max-new-tokens", "2", "--layer", "1", "--json", str(out), "--save", str(tmp_path / "t.qdt")])
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text())["steps"][0]["attention_peak"] is not None


def test_tui_says_a_linear_layer_has_no_attention_matrix(family_model):
    import asyncio

    from qdebug.tui.app import build_app
    from qdebug.tui.widgets.attention_view import AttentionView
    from tests.tui.conftest import SIZE, text_of, wait_for

    trace = _trace(family_model("qwen3_5"), tokens=2)

    async def run():
        app = build_app(trace=trace)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            await pilot.press("down", "down", "down")  # preprocess → encode → sync → layer.0 (linear)
            await wait_for(pilot, lambda: app.screen.sel.stage == "layer.0")
            await wait_for(pilot, lambda: "no attention matrix" in text_of(app.screen.query_one(AttentionView)))
            drawn = text_of(app.screen.query_one(AttentionView))
            assert "layer 0 is a linear-attention layer (gated delta rule)" in drawn and "recurrent state norm per head" in drawn
            await pilot.press("down")  # layer.1: full attention, a heatmap again
            await wait_for(pilot, lambda: "image 0 (5×4 patches) · layer 1/4" in text_of(app.screen.query_one(AttentionView)))

    asyncio.run(run())


def test_untapped_kernel_is_bit_identical(family_model):
    from transformers.models.qwen3_5 import modeling_qwen3_5 as m

    from qdebug.model.linear_attention import install

    install(m.__name__)
    fn = m.torch_chunk_gated_delta_rule
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 7, 2, 8) for _ in range(3))
    g, beta = -torch.rand(1, 7, 2), torch.rand(1, 7, 2)
    a = fn(q, k, v, g=g, beta=beta, output_final_state=True)
    b = fn.__wrapped__(q, k, v, g=g, beta=beta, output_final_state=True)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
