"""QDEBUG_VLLM_STEP_DELAY_MS: milliseconds, a bad value ignored (the server keeps serving); steps that start requests wait."""

import time
from types import SimpleNamespace

import pytest

from qdebug.engine.step_delay import ENV_STEP_DELAY, requested_delay, slow_steps


@pytest.mark.parametrize(("raw", "seconds"), [("", 0.0), ("200", 0.2), ("0", 0.0), ("abc", 0.0), ("-5", 0.0), ("99999", 0.0)])
def test_requested_delay(monkeypatch, raw, seconds):
    monkeypatch.setenv(ENV_STEP_DELAY, raw)
    assert requested_delay() == seconds


def test_only_steps_that_start_requests_wait():
    runner = SimpleNamespace(execute_model=lambda output: output)
    slow_steps(runner, 0.05)
    start = time.perf_counter()
    assert runner.execute_model(SimpleNamespace(scheduled_new_reqs=[])).scheduled_new_reqs == []  # decode only
    decode = time.perf_counter() - start
    start = time.perf_counter()
    runner.execute_model(SimpleNamespace(scheduled_new_reqs=["req"]))
    assert time.perf_counter() - start >= 0.05 > decode
