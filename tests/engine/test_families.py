"""Every family vLLM's CPU build serves, traced inside a real vLLM and compared with qdebug's transformers trace
of the same checkpoint, request and dtype: the stages agree within the dtype's tolerances, and each family's own
view (Qwen3-VL's deepstack levels, Qwen2-Audio's clip spans) reads the same from inside the engine."""

from __future__ import annotations

import pytest

from qdebug.analysis.diff import diff_traces
from qdebug.vocab import StageVerdict

from .families import DTYPES, build, traced_pair
from .vllm_server import VllmServer

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module", params=sorted(DTYPES))
def pair(request, vllm_py, tmp_path_factory):
    family = request.param
    where = tmp_path_factory.mktemp(f"engine-{family}")
    checkpoint = build(family, where / "checkpoint")
    with VllmServer(vllm_py, where, model=checkpoint, trace_dir=where / "traces", dtype=DTYPES[family]) as server:
        server.traces = where / "traces"
        yield traced_pair(family, server, checkpoint, where, f"{family}-1")


def test_the_engine_agrees_with_transformers_at_every_stage(pair):
    engine, local = pair.engine, pair.local
    assert engine.meta.engine["name"] == "vllm" and engine.meta.model["dtype"] == DTYPES[pair.family]
    assert engine.input_ids == local.input_ids
    assert [s for s in engine.stage_names] == [s for s in local.stage_names]
    result = diff_traces(local, engine)
    assert result.first_divergence is None, [(s.name, s.verdict, s.max_abs, s.detail) for s in result.stages]
    assert {s.verdict for s in result.stages} == {StageVerdict.OK}
    assert engine.generated_ids == local.generated_ids
    assert pair.answer.strip() == engine.generated_text.strip()
    assert all(s.ok for name, s in engine.stages.items() if name in ("preprocess", "encode", "sync")), \
        {n: [c.name for c in s.checks if not c.ok] for n, s in engine.stages.items()}


def test_each_familys_own_view_reads_the_same_inside_the_engine(pair):
    engine, local = pair.engine, pair.local
    if pair.family == "qwen3_vl":  # deepstack: vLLM adds level i after layer i, to the image's rows, as transformers does
        from qdebug.analysis.detectors.deepstack import deepstack_findings

        view = lambda t: [(r["layer"], r["added"], r["rows"], r["level"]) for r in t.meta.deepstack["layers"]]
        assert view(engine) == view(local) == [(0, True, list(range(3, 23)), 0), (1, True, list(range(3, 23)), 1), (2, False, [], None)]
        assert engine.meta.deepstack["features_handed"] == local.meta.deepstack["features_handed"] == 2
        assert min(r["match"] for r in engine.meta.deepstack["layers"] if r["added"]) > 0.999
        assert deepstack_findings(engine) == []
    elif pair.family == "qwen2_audio":  # the clip's span, frames and rows; where its rows landed
        keys = ("span", "frames", "rows", "rate", "seconds_per_row")
        assert [{k: c[k] for k in keys} for c in engine.meta.audio] == [{k: c[k] for k in keys} for c in local.meta.audio]
        landed = lambda t: [(c.text_offset, c.audio_offset, c.rows) for c in t.stages["sync"].summary.audio]
        assert landed(engine) == landed(local) and landed(engine)[0][0] == landed(engine)[0][1]
        assert engine.request.audio[0].startswith("vllm:")
    elif pair.family == "qwen2_5_omni":  # the thinker's image: one item, at its placeholders, with the model's own positions
        from qdebug.trace.items import trace_items

        item = lambda t: [(i.modality, i.runs, i.rows, i.grid_thw) for i in trace_items(t)]
        assert item(engine) == item(local) == [("image", ((3, 27),), 24, (1, 8, 12))]
        assert engine.meta.model["architecture"] == local.meta.model["architecture"] == "Qwen2_5OmniThinkerForConditionalGeneration"
        assert [c.name for c in engine.stages["sync"].checks if "get_mrope_input_positions" in c.name]  # and it held (ok above)
    else:  # image families: each image's span and where its rows landed
        landed = lambda t: [(s.text_offset, s.visual_offset, s.rows) for s in t.stages["sync"].summary.images]
        assert landed(engine) == landed(local) and landed(engine)[0][0] == landed(engine)[0][1]
        assert [i.grid_thw for i in engine.images] == [i.grid_thw for i in local.images]
