"""Each stage of a trace holds what DESIGN.md says, and its checks pass on a healthy run."""

import torch

from qdebug.trace.request import build_request
from qdebug.trace.runner import trace_request
from tests.conftest import scene


def test_stage_names_in_pipeline_order(demo_trace):
    trace, _ = demo_trace
    names = trace.stage_names
    assert names[:3] == ["preprocess", "encode", "sync"]
    assert names[3:7] == [f"layer.{i}" for i in range(4)]
    assert names[7] == "logits"
    assert names[8:] == [f"step.{k}" for k in range(len(trace.steps))]


def test_preprocess_and_sync_offsets(demo_trace):
    trace, s = demo_trace
    img = trace.images[0]
    assert img.size == (140, 196)
    assert img.grid_thw == (1, 14, 10)  # 196/14 rows, 140/14 cols of patches
    assert (img.rows, img.cols) == (7, 5)
    start, end = img.span
    assert end - start == 35
    assert all(trace.tokens[p] == "<|image_pad|>" for p in range(start, end))
    assert trace.tokens[start - 1] == "<|vision_start|>" and trace.tokens[end] == "<|vision_end|>"
    sync = trace.stages["sync"].summary.images[0]
    assert sync.visual_offset == sync.text_offset == start
    assert sync.rows == sync.placeholders == 35
    assert trace.stages["sync"].ok and trace.findings == []


def test_mrope_positions_are_the_models_own(demo, demo_trace):
    trace, _ = demo_trace
    pos = trace.tensors["sync.position_ids"]
    assert torch.equal(pos, trace.tensors["sync.expected_position_ids"])
    start, end = trace.images[0].span
    # Inside the image: t constant, h over rows, w over columns (row-major merged grid).
    t, h, w = pos[:, start:end]
    assert len(set(t.tolist())) == 1
    assert h.reshape(7, 5)[:, 0].tolist() == [h[0].item() + r for r in range(7)]
    assert w.reshape(7, 5)[0].tolist() == [w[0].item() + c for c in range(5)]


def test_encode_rows_land_verbatim(demo_trace):
    trace, _ = demo_trace
    start, end = trace.images[0].span
    assert torch.equal(trace.tensors["sync.embeds"][start:end], trace.tensors["encode.0"])


def test_two_images_get_two_spans_in_order(demo):
    a, b = scene(1, width=84, height=84), scene(2, width=224, height=112)
    request = build_request("<image> and <image> : describe the image.", [], images=[a.image, b.image], max_new_tokens=4)
    trace = trace_request(demo, request)
    (s0, e0), (s1, e1) = trace.images[0].span, trace.images[1].span
    assert e0 - s0 == 9 and e1 - s1 == 32 and e0 < s1
    assert trace.stages["sync"].ok
    att = trace.tensors["layer.0.attn"]
    assert att.shape[-1] == 41  # columns: both images' tokens


def test_steps_topk_and_logits(demo_trace):
    trace, s = demo_trace
    assert trace.generated_text == s.caption
    for step in trace.steps:
        assert step.topk.token_ids[0] == step.token_id  # greedy picks the top-1
        assert 0 < sum(step.topk.probs) <= 1 + 1e-6 and 0 <= step.entropy
        assert step.topk.probs == sorted(step.topk.probs, reverse=True)
    assert trace.steps[-1].token == "<|im_end|>"
    assert trace.tensors["logits.topk_ids"].shape == (len(trace.input_ids), 5)
