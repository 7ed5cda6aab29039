"""An engine trace of one image request, made inside a real vLLM, against qdebug's own trace of that request."""

from __future__ import annotations

import pytest

from qdebug.analysis.diff import diff_traces
from qdebug.trace.tensor_names import TensorKind as T
from qdebug.vocab import StageVerdict

from .client import engine_trace, local_trace, request_for, send

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def pair(traced_server):
    request = request_for("red_circle_top_left.png")
    answer = send(traced_server, request, "red-circle")
    return answer, engine_trace(traced_server, "red-circle"), local_trace(request)


def test_engine_trace_has_every_stage_of_the_local_trace(pair):
    _, engine, local = pair
    assert engine.meta.engine["name"] == "vllm" and engine.meta.engine["version"].startswith("0.32")
    assert engine.meta.engine["tensor_parallel_size"] == 1 and engine.meta.model["dtype"] == "float32"
    layers = [f"layer.{n}" for n in range(local.num_layers)]
    assert [s for s in engine.stage_names if not s.startswith("step.")] == ["preprocess", "encode", "sync", *layers, "logits"]
    assert engine.num_layers == local.num_layers == 4
    for n in range(4):  # every prompt row of every layer, as qdebug's own --keep hidden
        assert engine.tensor(T.LAYER_HIDDEN, layer=n).shape == local.tensor(T.LAYER_HIDDEN, layer=n).shape


def test_spans_and_visual_offsets_equal_qdebugs_own(pair):
    _, engine, local = pair
    assert engine.input_ids == local.input_ids
    assert [i.span for i in engine.images] == [i.span for i in local.images] == [(3, 27)]
    assert [i.grid_thw for i in engine.images] == [i.grid_thw for i in local.images]
    landed = lambda t: [(s.text_offset, s.visual_offset, s.rows) for s in t.stages["sync"].summary.images]
    assert landed(engine) == landed(local) == [(3, 3, 24)]
    assert engine.stages["preprocess"].ok and engine.stages["sync"].ok  # vLLM's placeholder range is the span of image tokens
    assert engine.generated_ids == local.generated_ids


def test_the_engine_agrees_with_transformers_at_every_stage(pair):
    answer, engine, local = pair
    result = diff_traces(local, engine)
    assert result.first_divergence is None, result.to_json()["stages"]
    assert {s.verdict for s in result.stages} == {StageVerdict.OK}
    assert max(s.max_abs for s in result.stages) < 1e-4  # measured 9.5e-6 (layer.2) on the demo in float32
    # positions are vLLM's own MRoPE ids, equal to transformers' get_rope_index
    assert engine.tensor(T.SYNC_POSITION_IDS).tolist() == local.tensor(T.SYNC_POSITION_IDS).tolist()
    assert answer.strip() == engine.generated_text == local.generated_text


def test_an_untagged_request_leaves_no_trace(traced_server):
    before = sorted(p.name for p in traced_server.traces.glob("*.qdt"))
    send(traced_server, request_for("yellow_circle_bottom_left.png"), tagged=False)
    send(traced_server, request_for("yellow_circle_bottom_left.png"), "after-untagged")
    engine_trace(traced_server, "after-untagged")  # the plugin wrote this one: the untagged one came before it
    after = sorted(p.name for p in traced_server.traces.glob("*.qdt"))
    assert sorted(set(after) - set(before)) == ["after-untagged.qdt"]


def test_the_same_id_twice_never_replaces_a_trace(traced_server):
    request = request_for("blue_circle_top_right.png")
    send(traced_server, request, "twice")
    first = engine_trace(traced_server, "twice")
    send(traced_server, request, "twice")
    import time

    from qdebug.engine.trace_dir import find_in_index
    from qdebug.trace.schema import load_trace

    deadline = time.monotonic() + 60
    while find_in_index(traced_server.traces, "qdebug_id", "twice")["trace"] != "twice-2.qdt" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert (traced_server.traces / "twice.qdt").exists() and (traced_server.traces / "twice-2.qdt").exists()
    assert not list(traced_server.traces.glob(".qdebug-*"))  # no temporary left behind
    # the second run found no full KV block to reuse (the CPU build's 128 positions a block, a 35-position prompt): its
    # trace holds every prompt row again (a traced request reads the prefix cache like any other: test_traced_prefix_cache)
    second = load_trace(traced_server.traces / "twice-2.qdt")
    assert second.tensor(T.LAYER_HIDDEN, layer=0).shape[0] == len(second.input_ids) == len(first.input_ids)
