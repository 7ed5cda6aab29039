"""Which watch checks record a trace (issue 50 item 5), on the miniature runner (tests/engine_fakes.py) with the plugin's
own fault planters: a check before the step's decoder (positions, encoder_batch, as placement and counts) records the
request it flags; a check inside or after the decoder (layout, logits) cannot, says so, and arms the flight recorder,
which traces the next step's new requests and names one of their traces on the next violation of their step."""

from __future__ import annotations

from qdebug.engine.watch_log import read_findings
from qdebug.engine.watch_traces import trace_said

from tests.engine_fakes import FakeRunner, image, request, serve, video


def _findings(watcher, check: str) -> list:
    watcher.findings.drain()
    return [f for f in read_findings(watcher.settings.folder) if f.check == check]


def test_a_layout_violation_arms_the_recorder_and_the_next_requests_trace_is_named(tmp_path):
    runner = FakeRunner()
    watcher = serve(runner, tmp_path, fault="head-first:1", sample=1.0)
    tracer = runner._qdebug_tracer
    for rid in ("a", "b", "c"):
        runner.add(request(rid, [image(f"img-{rid}")]))
    runner.step({"a": None, "b": None, "c": None})
    [first] = _findings(watcher, "layout")
    assert first.trace == "" and not tracer.pending  # flagged inside the decoder: its prompt can no longer be traced whole
    assert trace_said(first.check, first.outcome, first.trace).startswith("no trace: this check runs after the step's decoder")
    assert watcher.flight.armed
    runner.add(request("d", [image("img-d")]))
    runner.add(request("e", [image("img-e")]))
    runner.step({"a": 1, "b": 1, "c": 1, "d": None, "e": None})  # d and e start here: recorded before the decoder
    assert tracer.pending == {"d", "e"} and not watcher.flight.armed
    second = _findings(watcher, "layout")[1]
    assert second.request_id in ("d", "e") and second.trace == f"traces/{second.request_id}.qdt", second
    assert set(second.cobatched) == {"a", "b", "c", "d", "e"} - {second.request_id}


def test_positions_and_encoder_batch_run_before_the_decoder_and_record_the_request_they_flag(tmp_path):
    runner = FakeRunner()
    watcher = serve(runner, tmp_path / "p", fault="temporal-ids-flat", sample=1.0)
    runner.add(request("a", [image("img-a")]))
    runner.add(request("v", [video("vid-v", grid=(2, 4, 4))]))
    runner.step({"a": None, "v": None})
    [found] = _findings(watcher, "positions")
    assert found.request_id == "v" and found.trace == "traces/v.qdt" and "v" in runner._qdebug_tracer.pending, found

    runner = FakeRunner()
    watcher = serve(runner, tmp_path / "e", fault="batch-dependent-encoder", sample=1.0)
    for rid in ("a", "b", "c"):
        runner.add(request(rid, [image(f"img-{rid}")]))
    runner.step({"a": None, "b": None, "c": None})
    [found] = _findings(watcher, "encoder_batch")
    assert found.trace == f"traces/{found.request_id}.qdt" and found.request_id in runner._qdebug_tracer.pending, found
