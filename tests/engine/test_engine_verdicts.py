"""`replay --endpoint --engine-traces --model` judges each request three ways (the local model alone, the engine alone,
the engine in each burst) against a real vLLM with qdebug's plugin: a batch-dependent encoder is `batch_dependent` at
`encode`, naming the requests of its encoder call; a clean engine under the same bursts is all ok and says how it batched."""

from __future__ import annotations

import pytest

from .endpoint_story import assert_one_story, records, replay
from .test_engine_faults import faulty_server

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def batch_encoder(vllm_py, tmp_path_factory):
    """vLLM whose encoder mixes every item of a call with the call's other items (alone: untouched)."""
    # An engine that gathers each burst before its first step (QDEBUG_VLLM_GATHER_MS), so the burst shares encoder calls
    # as on a loaded GPU server; without it this 2-core server finished each request before the next arrived (one item
    # a call), and a fixed step delay did not change that on a quiet machine.
    with faulty_server(vllm_py, tmp_path_factory.mktemp("batch-encoder"), "batch-dependent-encoder",
                       extra_env={"QDEBUG_VLLM_GATHER_MS": "1000"}) as server:
        yield server


def test_a_batch_dependent_encoder_is_found_at_encode_naming_its_encoder_call(batch_encoder, tmp_path):
    doc, result = replay(batch_encoder, tmp_path / "r.json", "--repeat", "2", "--model", "demo", "--device", "cpu")
    assert_one_story(doc, result)
    tag = doc["engine_traces"]["tag"]
    flagged = 0
    for k in (1, 2):
        calls, _ = records(batch_encoder.traces, tag, f"burst-{k}")
        shared = {rid: sorted({o for o in call if o != rid}) for call in calls if len(set(call)) > 1 for rid in call}
        for r in doc["requests"]:
            verdict = r["burst_verdicts"][k - 1]
            if r["id"] in shared:  # encoded with others: its rows moved, and the report names who with, from the records
                assert verdict == "batch_dependent" and r["burst_stages"][k - 1] == "encode", (k, r)
                assert sorted(r["co_batched"][k - 1]) == shared[r["id"]], (k, r, shared)
                flagged += 1
            else:  # encoded alone (its own call, or served from no cache: fresh identities): as alone
                assert verdict == "ok", (k, r, calls)
    assert flagged, "no burst encoded two requests' images in one call"
    # the warm phase (production caching, after the bursts) is judged as a burst run is: a warm run encoded with others
    # is batch_dependent at encode too, named in its warm_run finding with who shared its call
    calls, _ = records(batch_encoder.traces, tag, "warm")
    shared = {rid: sorted({o for o in call if o != rid}) for call in calls if len(set(call)) > 1 for rid in call}
    for r in doc["requests"]:
        if r["id"] in shared:
            assert (r["warm_verdict"], r["warm_stage"], r["warm_parted"]) == ("batch_dependent", "encode", True), r
            (f,) = [f for f in doc["findings"] if f["kind"] == "warm_run" and f["request_id"] == r["id"]]
            assert "at encode" in f["message"] and all(o in f["message"] for o in shared[r["id"]]), f
            assert "not blamed on a cache" in f["message"], f  # the engine's record shows no read of another's content
        else:
            assert r["warm_verdict"] == "ok", (r, calls)
    dependent = [r for r in doc["requests"] if r["verdict"] == "batch_dependent"]
    assert dependent and all(r["stage"] == "encode" for r in dependent)
    assert not [r for r in doc["requests"] if r["verdict"] in ("contaminated", "server_mismatch")], doc["requests"]
    # a batch's doing is never called nondeterminism: no run that parted is "diverged", no nondeterminism finding
    assert not [r for r in doc["requests"] if "diverged" in r["burst_verdicts"] or r["warm_verdict"] == "diverged"], doc["requests"]
    assert not [f for f in doc["findings"] if f["kind"] == "nondeterminism"], doc["findings"]
    for r in dependent:
        if "batch_dependent" not in r["burst_verdicts"]:  # dependent in its warm run only (checked above)
            assert r["warm_verdict"] == "batch_dependent", r
            continue
        (f,) = [f for f in doc["findings"] if f["kind"] == "batch_dependent" and f["request_id"] == r["id"]]
        first = next(k for k, v in enumerate(r["burst_verdicts"]) if v == "batch_dependent")
        assert f["stage"] == "encode" and all(o in f["message"] for o in r["co_batched"][first]), f
        assert "rows differ" in f["message"] and "match no row seen" in f["message"], f  # the preset adds a mean: no one's rows
    assert result.returncode == 1


@pytest.fixture(scope="module")
def gathering_server(vllm_py, tmp_path_factory):
    """A clean vLLM with the plugin tracing (tagged requests), whose idle engine gathers each burst as the faulty one does."""
    from .vllm_server import VllmServer

    work = tmp_path_factory.mktemp("clean-gathering")
    env = {"VLLM_PLUGINS": "qdebug", "QDEBUG_VLLM_GATHER_MS": "1000"}
    with VllmServer(vllm_py, work, trace_dir=work / "traces", extra_env=env) as server:
        server.traces = work / "traces"
        yield server


def test_a_clean_engine_under_the_same_bursts_three_times_is_all_ok_and_says_how_it_batched(gathering_server, tmp_path):
    doc, result = replay(gathering_server, tmp_path / "r.json", "--repeat", "3", "--model", "demo", "--device", "cpu")
    assert {r["verdict"] for r in doc["requests"]} == {"ok"}, [(r["id"], r["verdict"], r["stage"]) for r in doc["requests"]]
    assert {(r["warm_verdict"], r["warm_parted"]) for r in doc["requests"]} == {("ok", False)}  # production caching changes nothing
    assert_one_story(doc, result)
    batching = doc["engine_traces"]["batching"]
    assert len(batching) == 3 and any(b["batched"] for b in batching), batching  # the bursts really batched
    tag = doc["engine_traces"]["tag"]
    for k, b in enumerate(batching, start=1):
        calls, steps = records(gathering_server.traces, tag, f"burst-{k}")
        assert b["encoder_calls"] == [len(c) for c in calls] and b["largest_step"] == max(map(len, steps)), (b, calls, steps)
        assert f"burst {k}: {b['said']}" in " ".join(result.stdout.replace("│", " ").split()), b  # the report says it
    for r in doc["requests"]:  # text@ and visual@ from the engine's own trace: its image's rows where its placeholders are
        assert r["text_offset"] is not None and r["visual_offset"] == r["text_offset"], r
