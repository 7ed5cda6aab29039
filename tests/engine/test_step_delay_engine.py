"""QDEBUG_VLLM_STEP_DELAY_MS inside a real vLLM with the plugin's tracer and clock on: every step that starts a request
waits first (each request takes at least the delay), and the plugin's clock counts the wait as vLLM's step time, never
as the plugin's own (the delay is a part on the runner's one wrap of execute_model, inside vLLM's timed share)."""

from __future__ import annotations

import time

import httpx
import pytest

from qdebug.engine.plugin_clock import read_clocks
from qdebug.engine.step_delay import ENV_STEP_DELAY

from .vllm_server import VllmServer

pytestmark = pytest.mark.vllm
DELAY = 0.4  # seconds
REQUESTS = 3


def test_a_step_delay_slows_each_requests_first_step_and_the_clock_counts_it_as_vllms(vllm_py, tmp_path):
    traces = tmp_path / "traces"
    env = {"VLLM_PLUGINS": "qdebug", ENV_STEP_DELAY: str(int(DELAY * 1000))}
    with VllmServer(vllm_py, tmp_path, trace_dir=traces, extra_env=env) as server:
        took = []
        for i in range(REQUESTS):  # one after another: each starts in a step of its own
            start = time.monotonic()
            response = httpx.post(f"{server.url}/v1/completions", timeout=120,
                                  json={"model": "demo", "prompt": f"a short prompt {i}", "max_tokens": 4, "temperature": 0})
            took.append(time.monotonic() - start)
            assert response.status_code == 200, response.text
        deadline = time.monotonic() + 15  # the worker rewrites its clock file at most once a second
        while (clock := read_clocks(str(traces)))["step_seconds"] - clock["own_seconds"] < REQUESTS * DELAY and time.monotonic() < deadline:
            time.sleep(0.25)
        log = server.log_text()
    assert f"each step that starts requests waits {DELAY * 1000:.0f} ms" in log
    assert "step hook failed" not in log and "not tracing this worker" not in log, log[-2000:]
    assert min(took) >= DELAY, took
    assert clock["steps"] >= REQUESTS * 2, clock  # a prefill step and decode steps each
    assert clock["step_seconds"] - clock["own_seconds"] >= REQUESTS * DELAY, clock  # the waits are vLLM's share
    assert clock["own_seconds"] < DELAY, clock  # none of them is the plugin's
