"""`nondeterminism` only when the same batch composition, repeated, disagrees: under
`QDEBUG_VLLM_INJECT=nondeterministic-encoder` (fresh noise in every encoder call) one request replayed alone, again
and again (`--repeat`), parts from its own isolated run inside the engine: `diverged` with a `nondeterminism`
finding, never `batch_dependent` (nothing shared its calls or steps) nor `server_mismatch` (no reference asked)."""

from __future__ import annotations

import json
import shutil

import pytest

from qdebug.engine.batch_log import read_batch_log
from tests.endpoint.conftest import SAMPLE, run_qdebug

from .test_engine_faults import faulty_server

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def noisy_encoder(vllm_py, tmp_path_factory):
    """vLLM whose encoder adds noise drawn anew for every call."""
    with faulty_server(vllm_py, tmp_path_factory.mktemp("noisy-encoder"), "nondeterministic-encoder", seed=3) as server:
        yield server


def test_the_same_request_alone_repeated_that_disagrees_is_nondeterminism(noisy_encoder, tmp_path):
    shutil.copytree(SAMPLE / "capture", tmp_path / "capture")
    first = (SAMPLE / "capture.jsonl").read_text().splitlines()[0]
    capture = tmp_path / "one.jsonl"
    capture.write_text(first + "\n")
    rid = json.loads(first)["id"]
    out = tmp_path / "r.json"
    result = run_qdebug("replay", str(capture), "--endpoint", noisy_encoder.url, "--engine-traces", str(noisy_encoder.traces),
                        "--repeat", "3", "--json", str(out), env={"COLUMNS": "320"}, timeout=900)
    assert out.exists(), result.stdout + result.stderr
    doc = json.loads(out.read_text())
    (r,) = doc["requests"]
    assert r["id"] == rid and r["co_batched"] == [[], [], []], r  # alone in every burst run: the batch records say so
    assert r["verdict"] == "diverged" and set(r["burst_verdicts"]) == {"diverged"}, r
    assert r["stage"] == "encode" and set(r["burst_stages"]) == {"encode"}, r
    assert r["warm_verdict"] == "diverged" and r["warm_stage"] == "encode", r  # its warm run, alone too: the same rule
    kinds = {f["kind"] for f in doc["findings"] if f.get("request_id") == rid}
    assert "nondeterminism" in kinds and not kinds & {"batch_dependent", "server_mismatch", "contamination"}, doc["findings"]
    (f,) = [f for f in doc["findings"] if f["kind"] == "nondeterminism"]
    assert f["stage"] == "encode" and "3/3 burst(s)" in f["message"], f
    assert result.returncode == 1, result.stderr


@pytest.fixture(scope="module")
def noisy_gathering_encoder(vllm_py, tmp_path_factory):
    """The noisy encoder on an engine that gathers each burst (QDEBUG_VLLM_GATHER_MS): every burst run of the same
    requests is one encoder call of the same items, so repeated bursts have the same batch composition."""
    with faulty_server(vllm_py, tmp_path_factory.mktemp("noisy-gathering"), "nondeterministic-encoder", seed=5,
                       extra_env={"QDEBUG_VLLM_GATHER_MS": "1000"}) as server:
        yield server


def test_twin_bursts_of_the_same_composition_that_disagree_are_nondeterminism_not_batch_dependent(noisy_gathering_encoder, tmp_path):
    """Each burst parts from the isolated runs (fresh noise per call), which alone would read as batch dependence; the
    twin rule sees that the two bursts of one composition disagree with each other, so it is nondeterminism. Whether
    the engine gathers the two bursts' items in the same order is its timing: up to three replays until it does."""
    shutil.copytree(SAMPLE / "capture", tmp_path / "capture")
    capture = tmp_path / "four.jsonl"
    capture.write_text("\n".join((SAMPLE / "capture.jsonl").read_text().splitlines()[:4]) + "\n")
    for attempt in range(3):
        seen = len(read_batch_log(noisy_gathering_encoder.traces).encoder_calls)  # the calls of earlier replays
        out = tmp_path / f"r{attempt}.json"
        # the twin rule of the bursts is this test's subject: no warm phase (a third composition the engine's timing decides)
        result = run_qdebug("replay", str(capture), "--endpoint", noisy_gathering_encoder.url, "--engine-traces",
                            str(noisy_gathering_encoder.traces), "--repeat", "2", "--engine-caches", "cold", "--json", str(out),
                            env={"COLUMNS": "320"}, timeout=900)
        assert out.exists(), result.stdout + result.stderr
        assert result.returncode == 1, result.stderr
        doc = json.loads(out.read_text())
        calls = read_batch_log(noisy_gathering_encoder.traces).encoder_calls[seen:]  # its records precede its traces
        twins = 0
        for r in doc["requests"]:
            first, second = (composition(calls, r["id"], f"burst-{k}") for k in (1, 2))
            if not r["co_batched"][0] or first != second:
                continue  # not the same batch twice (split, or the same items in another order): the twin rule does not apply
            twins += 1
            assert set(r["burst_verdicts"]) == {"diverged"} and r["verdict"] == "diverged", r
            kinds = {f["kind"] for f in doc["findings"] if f.get("request_id") == r["id"]}
            assert "nondeterminism" in kinds and "batch_dependent" not in kinds, (r["id"], doc["findings"])
        if twins >= 2:  # the gathered bursts really were twins
            return
    raise AssertionError(f"no replay of three gathered its bursts as twins: {[(r['id'], r['co_batched']) for r in doc['requests']]}")


def composition(calls: list, request_id: str, phase: str) -> tuple:
    """The encoder calls that carried a request's items in one phase, each as its (request, item) pairs in the call's
    order with the run's tag and phase left out: the batch composition the twin rule compares (order included: a
    batch-dependent fault may depend on where an item sits in its call)."""
    def bare(name: str) -> str:
        parts = name.split(".")
        return parts[1] if len(parts) == 3 and parts[2] == phase else name

    mine = [c for c in calls if any(n.endswith(f".{request_id}.{phase}") for n, _ in c.items)]
    return tuple(tuple((bare(n), i) for n, i in c.items) for c in mine)
