"""The flight recorder's bounds, without vLLM (a miniature runner and tracer, tests/engine_fakes.py): one recording per
MIN_GAP seconds, at most MAX_REQUESTS requests a recording, none once the trace folder holds its bytes, only requests
whose prompt starts in the step, its snapshots pruned oldest first, and the trace path each finding is given."""

from __future__ import annotations

import json
import os

import pytest

from qdebug.engine import watch_flight
from qdebug.engine.watch_flight import MAX_REQUESTS, MIN_GAP, FlightRecorder, prune_snapshots

from tests.engine_fakes import FakeRunner, FakeTracer, image, request, serve


class Clock:
    """time.monotonic as the recorder reads it, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(watch_flight.time, "monotonic", c)
    return c


def _recorder(folder, ids: list[str], *, started: tuple[str, ...] = (), trace_root=None) -> tuple[FlightRecorder, FakeTracer]:
    """A recorder on a runner holding `ids` (each prompt about to start, but those in `started`), its step open."""
    runner = FakeRunner()
    for rid in ids:
        runner.requests[rid] = request(rid, [image(f"img-{rid}")])
        runner.requests[rid].num_computed_tokens = 5 if rid in started else 0
    root = str(trace_root or os.path.join(folder, "traces"))
    os.makedirs(root, exist_ok=True)
    tracer = FakeTracer(runner, root)
    tracer.install()
    recorder = FlightRecorder(runner, str(folder))
    recorder.open = True
    return recorder, tracer


def test_a_recording_traces_the_request_and_its_step_and_returns_the_path_inside_the_watch_folder(tmp_path, clock):
    recorder, tracer = _recorder(tmp_path, ["a", "b", "c"])
    assert recorder.record("b", ["a", "c"]) == os.path.join("traces", "b.qdt")
    assert tracer.pending == {"a", "b", "c"} and tracer.hooked == 1  # the layer hooks asked for before the decoder runs
    assert tracer.bounded == dict.fromkeys("abc", recorder.limit)
    # a co-batched request that violates in the same step shares that recording (its own path, no new snapshot)
    assert recorder.record("c", ["a", "b"]) == os.path.join("traces", "c.qdt")
    recorder.drain()
    [snap] = [json.loads(p.read_text()) for p in tmp_path.glob("flight-*.json")]
    assert snap["request_id"] == "b" and snap["traced"] == ["b", "a", "c"]


def test_the_path_is_absolute_when_the_traces_are_outside_the_watch_folder_and_names_are_made_safe(tmp_path, clock):
    elsewhere = tmp_path / "shared-traces"
    recorder, _ = _recorder(tmp_path / "watch", ["../../etc/x y"], trace_root=elsewhere)
    assert recorder.record("../../etc/x y", []) == str(elsewhere / "etc_x_y.qdt")


def test_one_recording_per_min_gap(tmp_path, clock):
    recorder, tracer = _recorder(tmp_path, ["a", "b", "c"])
    assert recorder.record("a", []) != ""
    clock.now += MIN_GAP - 0.5
    assert recorder.record("b", []) == "" and tracer.pending == {"a"}  # too soon: b is not traced
    clock.now += 1.0
    assert recorder.record("b", []) == os.path.join("traces", "b.qdt") and tracer.pending == {"a", "b"}
    recorder.drain()
    assert len(list(tmp_path.glob("flight-*.json"))) == 2


def test_a_recording_traces_at_most_max_requests_the_offending_one_first(tmp_path, clock):
    ids = [f"r{i:02d}" for i in range(MAX_REQUESTS + 5)]
    recorder, tracer = _recorder(tmp_path, ids)
    assert recorder.record(ids[-1], ids[:-1]) == os.path.join("traces", f"{ids[-1]}.qdt")
    assert tracer.pending == {ids[-1], *ids[:MAX_REQUESTS - 1]} and len(tracer.pending) == MAX_REQUESTS
    recorder.drain()
    [snap] = [json.loads(p.read_text()) for p in tmp_path.glob("flight-*.json")]
    assert snap["traced"] == [ids[-1], *ids[:MAX_REQUESTS - 1]]


def test_only_requests_whose_prompt_starts_in_the_step_are_traced(tmp_path, clock):
    """A request already past its first rows cannot be traced whole: it is left out, and when it is the offending one
    nothing is recorded (no snapshot, no path)."""
    recorder, tracer = _recorder(tmp_path, ["a", "b", "c"], started=("b",))
    assert recorder.record("b", ["a", "c"]) == "" and tracer.pending == set()
    assert recorder.record("a", ["b", "c"]) == os.path.join("traces", "a.qdt") and tracer.pending == {"a", "c"}
    recorder.drain()
    assert [json.loads(p.read_text())["traced"] for p in tmp_path.glob("flight-*.json")] == [["a", "c"]]


def test_nothing_is_recorded_once_the_decoder_has_run_or_without_a_tracer(tmp_path, clock):
    recorder, tracer = _recorder(tmp_path, ["a"])
    recorder.open = False
    assert recorder.record("a", []) == "" and tracer.pending == set()
    bare = FlightRecorder(FakeRunner(), str(tmp_path))
    bare.open = True
    assert bare.record("a", []) == ""
    assert not list(tmp_path.glob("flight-*.json"))


def test_no_recording_once_the_trace_folder_holds_its_bytes(tmp_path, clock, monkeypatch, caplog):
    """QDEBUG_VLLM_WATCH_TRACE_MB=1: with a mebibyte of traces (and index) in the folder, nothing more is recorded."""
    monkeypatch.setenv("QDEBUG_VLLM_WATCH_TRACE_MB", "1")
    recorder, tracer = _recorder(tmp_path, ["a", "b"])
    assert recorder.limit == 1 << 20
    root = tmp_path / "traces"
    (root / "old.qdt").write_bytes(b"x" * ((1 << 20) - 100))
    (root / "unrelated.bin").write_bytes(b"x" * (4 << 20))  # not a trace: not counted
    assert recorder.record("a", []) == os.path.join("traces", "a.qdt")  # under the bound
    clock.now += MIN_GAP
    (root / "index.jsonl").write_bytes(b"{}\n" * 40)  # the index counts too: now past the bound
    assert recorder.record("b", []) == "" and tracer.pending == {"a"}
    assert "holds 1 MiB of traces or more; no flight-recorder trace for b" in caplog.text


def test_a_bad_trace_bound_is_said_and_the_default_used(monkeypatch, caplog, tmp_path):
    for raw in ("0", "-3", "1.5", "lots"):
        monkeypatch.setenv("QDEBUG_VLLM_WATCH_TRACE_MB", raw)
        assert FlightRecorder(FakeRunner(), str(tmp_path)).limit == watch_flight.DEFAULT_TRACE_MB << 20
        assert f"QDEBUG_VLLM_WATCH_TRACE_MB={raw!r}" in caplog.text


def test_snapshots_past_the_count_are_pruned_oldest_first(tmp_path, monkeypatch):
    monkeypatch.setattr(watch_flight, "MAX_SNAPSHOTS", 3)
    names = [f"flight-20260101T00000{i}-{i}-r{i}.json" for i in range(6)]
    for i, name in enumerate(names):
        (tmp_path / name).write_text("{}")
        os.utime(tmp_path / name, ns=(10**18 + i * 10**9, 10**18 + i * 10**9))  # written in this order
    (tmp_path / "flight-notes.json").write_text("a user's")  # not a snapshot's name
    prune_snapshots(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*names[3:], "flight-notes.json"])


def _misplaced_step(folder) -> tuple:
    """A watched step in which b's placeholders take a's rows (a placement violation of b, a and b both starting)."""
    from tests.engine_fakes import misplace

    runner = FakeRunner()
    misplace(runner, victim="b", donor="a")
    watcher = serve(runner, folder)
    for rid in "ab":
        runner.add(request(rid, [image(f"img-{rid}")]))
    return runner, watcher


def test_a_violation_in_the_watch_carries_the_trace_the_recorder_started(tmp_path, clock):
    from qdebug.engine.watch_log import read_findings

    runner, watcher = _misplaced_step(tmp_path)
    runner.step({"a": None, "b": None})
    watcher.findings.drain()
    [found] = read_findings(str(tmp_path))
    assert found.request_id == "b" and found.trace == os.path.join("traces", "b.qdt")
    assert runner._qdebug_tracer.pending == {"a", "b"}


def test_a_recorder_that_raises_costs_the_finding_its_trace_only(tmp_path, clock, monkeypatch, caplog):
    from qdebug.engine.watch_log import read_findings
    from qdebug.engine.watch_metrics import read_counters

    runner, watcher = _misplaced_step(tmp_path)

    def broken(rid, cobatched):
        raise OSError("disk gone")

    monkeypatch.setattr(watcher.flight, "record", broken)
    runner.step({"a": None, "b": None})
    watcher.findings.drain()
    watcher.counters.flush()
    [found] = read_findings(str(tmp_path))
    assert (found.request_id, found.donors, found.trace) == ("b", ["a"], "")
    counters = read_counters(str(tmp_path), "fake")
    assert counters["violations"]["placement"] == 1 and counters["errors"]["placement"] == 0
    assert "no flight-recorder trace for b (OSError: disk gone)" in caplog.text
