"""`qdebug diff` semantics on the demo model: equivalent paths agree, injected faults part where they should."""

from dataclasses import replace

import pytest
import torch

from qdebug.analysis.detectors.layout import LayoutWatch
from qdebug.analysis.diff import diff_traces
from qdebug.commands.diff import DiffArgs, run_diff
from qdebug.errors import IncompatibleTracesError

IMAGE = str(__import__("pathlib").Path(__file__).resolve().parents[2] / "sample_data" / "green_triangle_top_right.png")


def _diff(**kw):
    return run_diff(DiffArgs(IMAGE, "Describe the image.", device="cpu", dtype="float32", max_new_tokens=10, **kw)).comparisons


@pytest.mark.parametrize("order", ["image-first", "text-first"])
def test_token_ids_and_embeds_paths_agree(demo, order):
    ((label, result, a, b),) = _diff(vary="paths", order=order)
    assert label == order
    assert result.first_divergence is None
    assert all(s.verdict == "ok" for s in result.stages if s.verdict != "missing")
    assert result.a_text == result.b_text and result.first_step_apart is None
    assert a.meta.input_path == "ids" and b.meta.input_path == "embeds"
    assert not [f for f in result.findings if f.kind.startswith("layout")]


def test_both_orders_in_one_run(demo):
    results = _diff(vary="paths", order="both")
    assert [r[0] for r in results] == ["image-first", "text-first"]
    first, second = results[0][2], results[1][2]
    assert first.images[0].span[0] < second.images[0].span[0]  # text-first puts the image later


@pytest.mark.parametrize("layer", [0, 1, 2, 3])
def test_head_first_parts_exactly_at_the_injected_layer(demo, layer):
    ((_, result, _, _),) = _diff(inject=f"head-first:{layer}")
    assert result.first_divergence is not None and result.first_divergence.name == f"layer.{layer}"
    layout = [f for f in result.findings if f.kind == "layout"]
    assert layout and {f.layer for f in layout} == {layer}
    assert all(f.message.startswith("B: ") for f in layout)
    assert "swapped" in layout[0].message


def test_mrope_text_only_parts_at_sync(demo):
    ((_, result, a, b),) = _diff(inject="mrope-text-only")
    assert result.first_divergence.name == "sync"
    sync = next(s for s in result.stages if s.name == "sync")
    assert torch.equal(a.tensors["sync.embeds"], b.tensors["sync.embeds"])  # same embeddings...
    assert not torch.equal(a.tensors["sync.position_ids"], b.tensors["sync.position_ids"])  # ...other positions
    assert "position ids" in sync.detail
    assert any(f.kind == "position_ids" and "MRoPE" in f.message for f in result.findings)
    layers = [s for s in result.stages if s.name.startswith("layer.")]
    assert layers[0].name == "layer.0" and layers[0].verdict == "diverged"
    assert b.stages["sync"].ok is False  # B's own trace flags the ids it received


def test_same_trace_twice_is_zero(demo_trace):
    trace, _ = demo_trace
    result = diff_traces(trace, trace)
    assert result.first_divergence is None and result.first_step_apart is None
    assert all(s.max_abs == 0 for s in result.stages if s.verdict != "missing")


def test_float32_vs_bfloat16_reports_truthfully(demo):
    ((_, result, a, b),) = _diff(vary="dtype")
    assert a.meta.model["dtype"] == "float32" and b.meta.model["dtype"] == "bfloat16"
    assert result.first_divergence is not None
    agree = [s.a_token == s.b_token for s in result.steps]
    assert [s.agree for s in result.steps] == agree
    assert (result.a_text == result.b_text) == (result.first_step_apart is None)


def test_different_requests_or_models_are_refused(demo, demo_trace):
    import copy

    from qdebug.trace.request import build_request
    from qdebug.trace.runner import trace_request
    from tests.conftest import scene

    trace, _ = demo_trace
    other = trace_request(demo, build_request("What do you see?", [], images=[scene(5).image], max_new_tokens=3))
    with pytest.raises(IncompatibleTracesError, match="different requests"):
        diff_traces(trace, other)
    alien = copy.copy(trace)
    alien.meta = replace(trace.meta, num_layers=28, model={**trace.meta.model, "architecture": "Qwen2_5_VLForConditionalGeneration"})
    with pytest.raises(IncompatibleTracesError, match="different models"):
        diff_traces(trace, alien)


class _Call:
    def __init__(self, layer, q, k, v):
        self.layer, self.query, self.key, self.value = layer, q, k, v


def _run(watch, layer, q, k, v):
    return watch(_Call(layer, q, k, v), lambda q2, k2, v2, **kw: ("out", None))


def test_layout_watch_uses_known_sizes():
    watch = LayoutWatch(num_heads=4, num_kv_heads=2, head_dim=8, prompt_len=12)
    good_q, good_kv = torch.zeros(1, 4, 12, 8), torch.zeros(1, 2, 12, 8)
    _run(watch, 0, good_q, good_kv, good_kv)
    assert watch.findings == []
    # 12 > 4 heads: the `seq_len < num_heads` heuristic would stay silent here; known sizes do not.
    _run(watch, 1, good_q.transpose(1, 2), good_kv.transpose(1, 2), good_kv.transpose(1, 2))
    assert [f.layer for f in watch.findings] == [1, 1, 1] and "swapped" in watch.findings[0].message
    # Decode step: q has T = 1, keys T = prompt + step.
    _run(watch, 0, torch.zeros(1, 4, 1, 8), torch.zeros(1, 2, 13, 8), torch.zeros(1, 2, 13, 8))
    assert len(watch.findings) == 3


def test_layout_watch_says_when_shape_is_ambiguous():
    watch = LayoutWatch(num_heads=4, num_kv_heads=4, head_dim=8, prompt_len=4)
    _run(watch, 2, torch.zeros(1, 4, 4, 8), torch.zeros(1, 4, 4, 8), torch.zeros(1, 4, 4, 8))
    assert watch.findings and all(f.kind == "layout_ambiguous" and f.severity == "info" for f in watch.findings)
