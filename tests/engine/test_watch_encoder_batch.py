"""The watch's sampled `encoder_batch` check inside a real vLLM (QDEBUG_VLLM_WATCH_SAMPLE=1), under untagged concurrent
traffic on an engine that gathers each burst (QDEBUG_VLLM_GATHER_MS, so bursts share encoder calls): under the batch-dependent encoder
preset its violations name the requests the engine's batch log says shared the call; on a clean server it runs and
finds nothing."""

from __future__ import annotations

import time

import pytest

from qdebug.engine.batch_log import read_batch_log
from qdebug.engine.watch_log import read_findings

from .vllm_server import VllmServer
from .watch_traffic import burst, distinct_images, watch_series

pytestmark = pytest.mark.vllm
CHECKS, VIOLATIONS, ERRORS = "qdebug_watch_checks_total", "qdebug_watch_violations_total", "qdebug_watch_errors_total"


def _server(vllm_py, where, **env) -> VllmServer:
    where.mkdir(parents=True, exist_ok=True)
    env = {"QDEBUG_VLLM_WATCH": "1", "QDEBUG_VLLM_WATCH_SAMPLE": "1", "QDEBUG_VLLM_WATCH_DIR": str(where / "watch"),
           "QDEBUG_VLLM_GATHER_MS": "1000", **env}
    return VllmServer(vllm_py, where, extra_env=env)


def _shared_calls(where) -> list:
    """The encoder calls of two or more items the engine's batch log records (the watch's traces folder)."""
    return [c for c in read_batch_log(where / "watch" / "traces").encoder_calls if len(c.items) > 1]


def _series_after(server, want) -> dict:
    deadline = time.monotonic() + 30
    while not want(series := watch_series(server)) and time.monotonic() < deadline:
        time.sleep(0.25)
    return series


def test_a_batch_dependent_encoder_is_named_with_its_call_partners(vllm_py, tmp_path):
    with _server(vllm_py, tmp_path, QDEBUG_VLLM_INJECT="batch-dependent-encoder") as server:
        for attempt in range(3):
            burst(server, distinct_images(tmp_path / "images", 8, seed=attempt), concurrency=8)
            if _shared_calls(tmp_path):
                break
        calls = _shared_calls(tmp_path)
        assert calls, "no encoder call carried two items"
        series = _series_after(server, lambda s: s.get((VIOLATIONS, "encoder_batch"), 0) >= 1)
        assert series.get((CHECKS, "encoder_batch"), 0) >= len(calls) and series.get((ERRORS, "encoder_batch"), 0) == 0, series
        assert series[(VIOLATIONS, "encoder_batch")] >= len(calls), series
        deadline = time.monotonic() + 30
        while not [f for f in read_findings(str(tmp_path / "watch")) if f.check == "encoder_batch"] and time.monotonic() < deadline:
            time.sleep(0.25)
    found = [f for f in read_findings(str(tmp_path / "watch")) if f.check == "encoder_batch"]
    assert found and all(f.outcome == "violation" and f.stage == "encode" for f in found)
    for f in found:
        # the call the engine logged as carrying this request's item: its other requests are the finding's co-batched
        partners = [set(c.names) - {f.request_id} for c in calls if c.carries(f.request_id)]
        assert set(f.cobatched) in partners, (f.request_id, f.cobatched, partners)
        assert f.cobatched and all(r in f.evidence for r in f.cobatched)


def test_a_clean_encoder_runs_the_check_and_finds_nothing(vllm_py, tmp_path):
    with _server(vllm_py, tmp_path) as server:
        for attempt in range(3):
            burst(server, distinct_images(tmp_path / "images", 8, seed=10 + attempt), concurrency=8)
            if _shared_calls(tmp_path):
                break
        calls = _shared_calls(tmp_path)
        assert calls, "no encoder call carried two items"
        series = _series_after(server, lambda s: s.get((CHECKS, "encoder_batch"), 0) >= len(calls))
    assert series.get((CHECKS, "encoder_batch"), 0) >= len(calls), series
    assert series.get((VIOLATIONS, "encoder_batch"), 0) == 0 and series.get((ERRORS, "encoder_batch"), 0) == 0, series
    assert not [f for f in read_findings(str(tmp_path / "watch")) if f.check == "encoder_batch"]


def test_an_encoder_batch_check_that_raises_is_counted_and_the_answers_are_unchanged(vllm_py, tmp_path):
    images = distinct_images(tmp_path / "images", 8, seed=20)
    with _server(vllm_py, tmp_path / "off", QDEBUG_VLLM_WATCH="0") as plain:
        expected = burst(plain, images, concurrency=8, max_tokens=8)
    with _server(vllm_py, tmp_path / "raising", QDEBUG_VLLM_WATCH_RAISE="encoder_batch") as server:
        answers = burst(server, images, concurrency=8, max_tokens=8)
        calls = _shared_calls(tmp_path / "raising")
        series = _series_after(server, lambda s: s.get((ERRORS, "encoder_batch"), 0) >= len(calls))
    assert answers == expected
    assert calls, "no encoder call carried two items"  # each sampled one raised, was counted and logged
    assert series[(ERRORS, "encoder_batch")] == series[(CHECKS, "encoder_batch")] >= len(calls), series
    deadline = time.monotonic() + 30
    while not (found := [f for f in read_findings(str(tmp_path / "raising" / "watch")) if f.check == "encoder_batch"]) and time.monotonic() < deadline:
        time.sleep(0.25)
    assert found and {f.outcome for f in found} == {"error"} and all("RuntimeError" in f.evidence for f in found), found
