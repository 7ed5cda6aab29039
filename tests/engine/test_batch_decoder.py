"""`QDEBUG_VLLM_INJECT=batch-dependent-decoder:L` inside a real vLLM: a request's layer-L rows depend on the other
requests of its step. `replay --endpoint --engine-traces --model` flags the requests that shared a step
`batch_dependent` at a decoder stage (never encode: the encoder is clean), naming who shared it, read from the
plugin's own step records; a request that ran alone in every step is ok."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .endpoint_story import assert_one_story, replay
from .test_engine_faults import faulty_server

pytestmark = pytest.mark.vllm
LAYER = 1


@pytest.fixture(scope="module")
def batch_decoder(vllm_py, tmp_path_factory):
    """vLLM whose layer LAYER mixes each request's rows with its step's other requests' (alone in a step: untouched)."""
    # an engine that gathers each burst (QDEBUG_VLLM_GATHER_MS), so a burst's requests share prefill steps on 2 cores
    with faulty_server(vllm_py, tmp_path_factory.mktemp("batch-decoder"), f"batch-dependent-decoder:{LAYER}",
                       extra_env={"QDEBUG_VLLM_GATHER_MS": "1000"}) as server:
        yield server


def step_partners(folder: Path, tag: str, phase: str) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """From batches.jsonl's step records of one phase: request id → the others that shared a prefill step with it, and
    → the others that shared any step with it (prefill or decode)."""
    prefill: dict[str, set[str]] = {}
    anyone: dict[str, set[str]] = {}
    ours = lambda n: n.startswith(f"{tag}.") and n.endswith(f".{phase}")  # noqa: E731
    rid = lambda n: n[len(tag) + 1:-len(phase) - 1]  # noqa: E731
    for path in (folder / "batches.1.jsonl", folder / "batches.jsonl"):
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            if rec["record"] == "encoder_call":
                continue
            names = [n for n in rec["prefill"] + rec["decode"] if ours(n)]
            for n in names:
                anyone.setdefault(rid(n), set()).update(rid(o) for o in names if o != n)
                if n in rec["prefill"]:
                    prefill.setdefault(rid(n), set()).update(rid(o) for o in names if o != n)
    return prefill, anyone


def test_a_batch_dependent_decoder_layer_is_found_at_that_layer_naming_its_step(batch_decoder, tmp_path):
    doc, result = replay(batch_decoder, tmp_path / "r.json", "--repeat", "2", "--model", "demo", "--device", "cpu")
    assert_one_story(doc, result)
    tag = doc["engine_traces"]["tag"]
    at_layer = 0
    for k in (1, 2):
        prefill, anyone = step_partners(batch_decoder.traces, tag, f"burst-{k}")
        for r in doc["requests"]:
            verdict, stage = r["burst_verdicts"][k - 1], r["burst_stages"][k - 1]
            if prefill.get(r["id"]):  # its prompt rows went through layer L beside other requests': they moved there
                assert (verdict, stage) == ("batch_dependent", f"layer.{LAYER}"), (k, r, prefill[r["id"]])
                assert sorted(r["co_batched"][k - 1]) == sorted(anyone[r["id"]]), (k, r, anyone[r["id"]])
                at_layer += 1
            elif anyone.get(r["id"]):  # shared decode steps only: its generated tokens' rows moved, never its encoder's
                assert verdict in ("batch_dependent", "ok") and stage not in ("encode", "sync"), (k, r)
            else:  # alone in every step: as alone
                assert verdict == "ok", (k, r)
    assert at_layer, "no burst ran two requests' prefills in one step"
    dependent = [r for r in doc["requests"] if r["verdict"] == "batch_dependent"]
    assert dependent and not [r for r in doc["requests"] if r["verdict"] in ("contaminated", "server_mismatch", "diverged")], doc["requests"]
    for r in dependent:
        if "batch_dependent" not in r["burst_verdicts"]:  # dependent in its warm run only (the warm phase is judged as a burst)
            assert r["warm_verdict"] == "batch_dependent" and r["warm_stage"] == f"layer.{LAYER}", r
            (f,) = [f for f in doc["findings"] if f["kind"] == "warm_run" and f["request_id"] == r["id"]]
            assert f"at layer.{LAYER}" in f["message"] and "step with" in f["message"], f
            continue
        (f,) = [f for f in doc["findings"] if f["kind"] == "batch_dependent" and f["request_id"] == r["id"]]
        first = next(k for k, v in enumerate(r["burst_verdicts"]) if v == "batch_dependent")
        assert "step with" in f["message"] and all(o in f["message"] for o in r["co_batched"][first]), f
    assert not [f for f in doc["findings"] if f["kind"] == "nondeterminism"], doc["findings"]
    assert result.returncode == 1
