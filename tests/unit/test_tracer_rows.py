"""The engine tracer takes a layer's traced rows in a few ops per step, not a few per request: what each request
keeps is exactly its own rows of the stream (layer output plus the residual vLLM defers), never a view of vLLM's
reused buffers, and a long decode holds no other request's rows for more than COMPACT_STEPS steps."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from qdebug.engine.requests import EngineRequest, rows_of_step
from qdebug.engine.vllm_tracer import COMPACT_STEPS, EngineTracer, _gather_plan


def _tracer(traced: dict[str, EngineRequest]) -> EngineTracer:
    tracer = EngineTracer(SimpleNamespace(), writer=None, trace_all=True)
    tracer.traced, tracer.num_layers = traced, 2
    return tracer


def _step(tracer: EngineTracer, req_ids: list[str], lengths: list[int], computed: dict[str, int]) -> None:
    qsl = [0]
    for n in lengths:
        qsl.append(qsl[-1] + n)
    tracer.slices = rows_of_step(req_ids, qsl, tracer.traced, computed)
    tracer.gather = _gather_plan(tracer.slices)


def _request(name: str, prompt: int) -> EngineRequest:
    return EngineRequest(name, name, list(range(prompt)), [], 8)


@pytest.mark.parametrize("traced_names", [["a", "b", "c", "d"], ["b", "d"]], ids=["every request (one run)", "some (indexed)"])
def test_each_request_keeps_its_own_rows_of_the_stream_as_before(traced_names):
    requests = {n: _request(n, p) for n, p in zip("abcd", (5, 3, 4, 6))}
    traced = {n: requests[n] for n in traced_names}
    tracer = _tracer(traced)
    # step: a and c decode one row each (their prompts done), b and d compute prompt rows
    computed = {"a": 5, "b": 0, "c": 4, "d": 2}
    for n in ("a", "c"):
        requests[n].prompt_rows = len(requests[n].prompt_ids)
    requests["d"].prompt_rows = 2
    _step(tracer, ["a", "b", "c", "d"], [1, 3, 1, 4], {n: computed[n] for n in traced})
    hidden, residual = torch.randn(9, 16), torch.randn(9, 16)
    want = hidden + residual
    for layer in (0, 1):
        tracer._record_layer(layer, (hidden, residual))
    hidden.zero_(), residual.zero_()  # vLLM reuses its buffers: nothing kept may change with them
    starts = {"a": 0, "b": 1, "c": 4, "d": 5}
    for n, req in traced.items():
        if n in ("b", "d"):
            end = starts[n] + (3 if n == "b" else 4)
            assert [t.shape[0] for t in req.hidden[1]] == [end - starts[n]]
            assert torch.equal(req.hidden[0][0], want[starts[n]:end])
        else:
            assert torch.equal(req.rec.step_hidden[1][0], want[starts[n]])


def test_a_long_decode_is_copied_out_of_the_shared_step_tensors():
    a, b = _request("a", 2), _request("b", 2)
    tracer = _tracer({"a": a, "b": b})
    a.prompt_rows = b.prompt_rows = 2
    rows = []
    for step in range(COMPACT_STEPS + 1):
        _step(tracer, ["a", "b"], [1, 1], {"a": 2 + step, "b": 2 + step})
        hidden = torch.randn(2, 8)
        rows.append(hidden[0].clone())
        tracer._record_layer(0, (hidden, None))
    kept = a.rec.step_hidden[0]
    assert len(kept) == COMPACT_STEPS + 1 and all(torch.equal(k, r) for k, r in zip(kept, rows))
    compacted = {t.untyped_storage().data_ptr() for t in kept[:COMPACT_STEPS]}
    assert len(compacted) == 1  # one tensor of a's own rows...
    assert kept[0].untyped_storage().nbytes() == COMPACT_STEPS * 8 * 4  # ...holding none of b's
    assert torch.equal(torch.stack(kept), torch.stack(rows))


def test_the_logits_rows_are_taken_at_once_and_kept_apart():
    a, b = _request("a", 2), _request("b", 2)
    tracer = _tracer({"a": a, "b": b})
    a.prompt_rows = b.prompt_rows = 2
    _step(tracer, ["x", "a", "b"], [1, 1, 1], {"a": 2, "b": 2})  # x: an untraced request in the same step
    logits = torch.randn(3, 50, dtype=torch.bfloat16)
    tracer._record_logits(logits)
    assert torch.equal(a.rec.step_logits[0], logits[1].float()) and torch.equal(b.rec.step_logits[0], logits[2].float())
    assert a.rec.step_logits[0].untyped_storage().nbytes() == 50 * 4  # its own row, not the step's
