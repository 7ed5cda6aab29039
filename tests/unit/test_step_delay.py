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


class _Core:
    """vLLM's EngineCoreProc as gather_bursts sees it: a scheduler, the input queue, a request handler."""

    def __init__(self, running: list) -> None:
        import queue

        self.scheduler = SimpleNamespace(running=running, waiting=[])
        self.input_queue = queue.Queue()
        self.handled: list = []

    def _process_input_queue(self) -> None:
        while not self.input_queue.empty():
            self._handle_client_request(*self.input_queue.get_nowait())

    def _handle_client_request(self, kind, request) -> None:
        self.handled.append(request)
        self.scheduler.waiting.append(request)

    def is_running(self) -> bool:
        return True


def test_an_idle_engine_gathers_a_burst_that_arrives_slowly_and_a_busy_one_does_not_wait():
    import threading

    from qdebug.engine.step_delay import gather_bursts

    class Core(_Core):
        pass

    gather_bursts(Core, 0.3)
    idle = Core(running=[])
    idle.input_queue.put(("add", "a"))

    def trickle() -> None:  # the front end hands the burst over one request every 100 ms
        for name in "bcd":
            time.sleep(0.1)
            idle.input_queue.put(("add", name))

    threading.Thread(target=trickle).start()
    idle._process_input_queue()
    assert idle.handled == ["a", "b", "c", "d"]  # one step starts all four
    busy = Core(running=["x"])
    busy.input_queue.put(("add", "a"))
    start = time.perf_counter()
    busy._process_input_queue()
    assert busy.handled == ["a"] and time.perf_counter() - start < 0.3
