"""Which rows of a flattened vLLM step belong to which traced request, and the engine's trace folder."""

from __future__ import annotations

import os

import pytest

from qdebug.engine.request_names import wants_trace
from qdebug.engine.requests import EngineRequest, RowGap, rows_of_step
from qdebug.engine.trace_dir import TraceDir, find_in_index, safe_stem


def _req(rid: str, prompt: int) -> EngineRequest:
    return EngineRequest(rid, rid, list(range(prompt)), [], 16)


def test_each_request_owns_its_query_start_loc_rows_and_its_logits_row():
    a, b = _req("a", 30), _req("b", 5)
    # step: x (untraced, 7 rows), a (prefill 0..30), b (decode: its prompt is done)
    slices = rows_of_step(["x", "a", "b"], [0, 7, 37, 38], {"a": a, "b": b}, {"a": 0, "b": 6})
    assert [(s.request.req_id, s.start, s.end, s.prefill, s.logits_row) for s in slices] == [("a", 7, 37, True, 1), ("b", 37, 38, False, 2)]


def test_a_chunked_prefill_samples_only_with_its_last_chunk_and_must_continue_where_it_stopped():
    a = _req("a", 30)
    first = rows_of_step(["a"], [0, 20], {"a": a}, {"a": 0})
    assert first[0].prefill and first[0].logits_row is None  # vLLM computes logits for it but discards them
    a.prompt_rows = 20
    second = rows_of_step(["a"], [0, 10], {"a": a}, {"a": 20})
    assert second[0].logits_row == 0
    with pytest.raises(RowGap, match="prefill resumes at 16 but 20 prompt rows were recorded") as gap:
        rows_of_step(["a"], [0, 14], {"a": a}, {"a": 16})  # a prefix-cache read or a preemption: not the whole prompt
    assert gap.value.req_id == "a"


def test_more_than_one_row_in_a_decode_step_is_refused():
    with pytest.raises(RowGap, match="speculative decoding"):
        rows_of_step(["a"], [0, 3], {"a": _req("a", 5)}, {"a": 9})


@pytest.mark.parametrize("value,traced", [(True, True), ("true", True), ("1", True), (1, True), (False, False), ("no", False), (None, False)])
def test_the_client_tag(value, traced):
    assert wants_trace({"qdebug_trace": value} if value is not None else {}, False) is traced
    assert wants_trace({}, True)


def test_the_trace_folder_never_replaces_a_file(demo_trace, tmp_path):
    demo_trace, _ = demo_trace
    from qdebug.trace.schema import load_trace

    folder = TraceDir(tmp_path / "traces")
    (folder.root / "mine.qdt").write_text("a user's file")
    first = folder.write(demo_trace, "mine", {"id": "r1", "qdebug_id": "mine"})
    second = folder.write(demo_trace, "mine", {"id": "r2", "qdebug_id": "mine"})
    assert (first.name, second.name) == ("mine-2.qdt", "mine-3.qdt")
    assert (folder.root / "mine.qdt").read_text() == "a user's file"
    assert find_in_index(folder.root, "qdebug_id", "mine") == {"id": "r2", "qdebug_id": "mine", "trace": "mine-3.qdt"}
    assert load_trace(second).generated_text == demo_trace.generated_text
    assert sorted(p.name for p in folder.root.iterdir()) == ["index.jsonl", "mine-2.qdt", "mine-3.qdt", "mine.qdt"]
    umask = os.umask(0)
    os.umask(umask)
    assert second.stat().st_mode & 0o777 == 0o666 & ~umask  # an ordinary file a colleague can read


def test_trace_names_from_client_ids_cannot_leave_the_folder():
    assert safe_stem("../../etc/passwd") == "etc_passwd"
    assert safe_stem("") == "request" and safe_stem("...") == "request"
    assert safe_stem("req-1.a_b") == "req-1.a_b" and len(safe_stem("x" * 500)) == 100


def test_keeping_the_last_row_still_states_every_row_and_joins_chunked_prefill():
    import torch

    from qdebug.trace.stages.layers import layer_stages

    rows = torch.randn(30, 8)
    for keep in (True, False):
        req = _req("a", 30)
        req.keep_hidden = keep
        req.embeds, req.positions = [rows[:20], rows[20:]], [torch.zeros(3, 20, dtype=torch.long), torch.ones(3, 10, dtype=torch.long)]
        req.hidden = {0: [rows[:20], rows[20:]]}
        req.finish_prefill()
        tensors: dict = {}
        stage = layer_stages(req.rec, 1, tensors)["layer.0"]
        assert req.rec.embeds.shape == (30, 8) and req.rec.position_ids.shape == (3, 30)
        assert stage.summary.stats.shape == [30, 8]  # statistics over every row either way
        if keep:
            assert torch.equal(tensors["layer.0.hidden"], rows)
        else:
            assert set(tensors) == {"layer.0.last"} and torch.equal(tensors["layer.0.last"], rows[-1:])
