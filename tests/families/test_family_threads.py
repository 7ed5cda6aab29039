"""Two threads tracing one Qwen3-VL (deepstack) or Qwen3.5 (linear attention) model at once: each trace equals the
trace of the same request traced alone, family evidence included (the family recorders hear only their thread)."""

import json
import threading

import pytest
import torch

from qdebug.trace.request import build_request
from qdebug.trace.runner import trace_request
from tests.conftest import scene

# Prefill moments at which both threads wait for each other, so their forward passes run interleaved layer by layer.
LOCKSTEP = ("encode", "sync", "layer.0", "layer.1", "layer.2")


def _requests():
    return [build_request(prompt, [], images=[scene(seed, width=w, height=h).image], max_new_tokens=3)
            for prompt, seed, w, h in (("Describe the image.", 3, 112, 168), ("What shape is it?", 11, 168, 112))]


def _document(trace) -> dict:
    """The trace's JSON without its timing fields, and its tensors."""
    doc = json.loads(json.dumps(trace.to_json()))
    doc.get("meta", {}).pop("timings", None)
    doc.get("meta", {}).pop("created", None)
    return doc


@pytest.mark.parametrize("family", ["qwen3_vl", "qwen3_5"])
def test_two_threads_equal_their_single_thread_traces(family_model, family):
    loaded = family_model(family)
    requests = _requests()
    alone = [trace_request(loaded, r) for r in requests]
    gate = threading.Barrier(2, timeout=60)
    met: list[str] = []

    def lockstep(stage: str) -> None:
        if stage in LOCKSTEP:
            met.append(stage)
            gate.wait()

    together: list = [None, None]
    errors: list = []

    def work(i: int) -> None:
        try:
            together[i] = trace_request(loaded, requests[i], on_stage=lockstep)
        except BaseException as exc:  # reported below: a thread's failure must fail the test
            errors.append(exc)
            gate.abort()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert sorted(met) == sorted(LOCKSTEP * 2)  # the two prefills really did run side by side
    for one, both in zip(alone, together):
        assert _document(both) == _document(one)
        assert set(both.tensors) == set(one.tensors)
        for name, t in one.tensors.items():
            assert torch.equal(both.tensors[name], t), name
    if family == "qwen3_vl":
        for trace, request in zip(together, requests):
            start, end = trace.images[0].span
            added = [r for r in trace.meta.deepstack["layers"] if r["added"]]
            assert added and all(r["rows"] == list(range(start, end)) for r in added)
    else:
        for trace in together:
            kinds = [trace.stages[f"layer.{i}"].summary.kind for i in range(len(trace.meta.layer_types))]
            assert "linear_attention" in kinds
            assert all(trace.stages[f"layer.{i}"].summary.linear_attention["calls"] >= 1
                       for i, k in enumerate(kinds) if k == "linear_attention")
