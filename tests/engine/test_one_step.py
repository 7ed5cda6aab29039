"""Two requests served in one scheduler step: vLLM flattens their rows into one token dimension, and each trace
holds only its own rows (checked against a trace of each request sent alone)."""

from __future__ import annotations

import threading

import pytest
import torch

from qdebug.analysis.diff import diff_traces
from qdebug.trace.tensor_names import TensorKind as T

from .client import engine_trace, request_for, send

pytestmark = pytest.mark.vllm
IMAGES = {"a": "blue_square_bottom_right.png", "b": "green_triangle_top_right.png"}


def _together(server, attempt: int):
    """Send both requests at once; their traces, if the engine scheduled them in one step (else None)."""
    names = {k: f"together-{attempt}-{k}" for k in IMAGES}
    start = threading.Barrier(len(IMAGES))

    def go(k):
        start.wait()
        send(server, request_for(IMAGES[k]), names[k])

    threads = [threading.Thread(target=go, args=(k,)) for k in IMAGES]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    traces = {k: engine_trace(server, names[k]) for k in IMAGES}
    a, b = traces["a"].meta.engine, traces["b"].meta.engine
    shared = b["request_id"] in a["co_scheduled"] and a["request_id"] in b["co_scheduled"]
    return traces if shared else None


def test_two_requests_in_one_step_each_hold_only_their_own_rows(traced_server):
    together = next(filter(None, (_together(traced_server, n) for n in range(6))), None)
    assert together is not None, "the engine never scheduled the two requests in one step in 6 tries"
    alone = {}
    for k in IMAGES:
        send(traced_server, request_for(IMAGES[k]), f"alone-{k}")
        alone[k] = engine_trace(traced_server, f"alone-{k}")
    for k in IMAGES:
        both, solo = together[k], alone[k]
        steps = both.meta.engine["batches"]
        assert max(s["requests"] for s in steps) >= 2  # the evidence that rows of two requests were flattened together
        assert all(s["requests"] == 1 for s in solo.meta.engine["batches"])
        assert both.input_ids == solo.input_ids
        n = len(both.input_ids)
        assert both.tensor(T.SYNC_EMBEDS).shape[0] == n and both.tensor(T.LAYER_HIDDEN, layer=3).shape[0] == n
        # its own image's rows, where its own placeholders are
        assert [s.visual_offset for s in both.stages["sync"].summary.images] == [i.span[0] for i in both.images]
        assert torch.allclose(both.tensor(T.ENCODE, item=0), solo.tensor(T.ENCODE, item=0), atol=1e-5)
        result = diff_traces(solo, both)
        assert result.first_divergence is None, [(s.name, s.max_abs) for s in result.stages]
        assert both.generated_ids == solo.generated_ids
    assert together["a"].input_ids != together["b"].input_ids  # two different requests, not one twice
