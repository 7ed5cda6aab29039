"""A busy engine on demand: bursts that really share steps and encoder calls on a small test server.

On a small CPU server vLLM finishes a request before the front end has prepared the next one, so a burst of
concurrent requests never shares a step or an encoder call, and a batching bug cannot show. A loaded GPU server
queues what arrives during a step and schedules it together. Two settings give a test server that queue; both change
timing only, never a tensor, and are off unless set:

- `QDEBUG_VLLM_GATHER_MS=N`: an idle engine that has just received requests keeps taking more until none arrived for
  N ms (10 s at most), then schedules them together: a burst starts in one step, however slowly the front end hands
  its requests over. A request alone waits N ms.
- `QDEBUG_VLLM_STEP_DELAY_MS=N`: each model-runner step that starts new requests waits N ms first (what arrives
  meanwhile is scheduled together in the next step; on a quiet machine the front end can still be slower).
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

ENV_STEP_DELAY = "QDEBUG_VLLM_STEP_DELAY_MS"
ENV_GATHER = "QDEBUG_VLLM_GATHER_MS"
GATHER_LIMIT = 10.0  # seconds an idle engine holds a burst at most: a steady trickle must still be served

log = logging.getLogger("vllm.qdebug")


def requested_delay() -> float:
    """Seconds each step that starts requests waits (0 when unset); a bad value is logged and ignored."""
    return _milliseconds(ENV_STEP_DELAY)


def requested_gather() -> float:
    """Seconds of quiet an idle engine waits for before it starts what it received (0 when unset)."""
    return _milliseconds(ENV_GATHER)


def _milliseconds(name: str) -> float:
    """The variable `name` in seconds (0 when unset); a bad value is logged and ignored (the server keeps serving)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return 0.0
    try:
        ms = float(raw)
    except ValueError:
        ms = -1.0
    if not 0 <= ms <= 10_000:
        log.error("qdebug: %s=%s: expected milliseconds in 0..10000; ignored", name, raw)
        return 0.0
    return ms / 1000


def gather_bursts(core_class: Any, seconds: float) -> None:
    """Make `core_class._process_input_queue` (vLLM's EngineCoreProc) gather a burst: when the engine is idle (nothing
    running) and requests are waiting, keep taking requests until none arrived for `seconds` (GATHER_LIMIT at most)."""
    import queue

    process = getattr(core_class, "_process_input_queue")
    if getattr(process, "_qdebug", False):
        return

    def _process_input_queue(self: Any) -> None:
        process(self)
        scheduler = self.scheduler
        if getattr(scheduler, "running", None) or not len(getattr(scheduler, "waiting", ()) or ()):
            return  # busy (continuous batching takes what comes) or nothing to start
        deadline = time.monotonic() + GATHER_LIMIT
        while self.is_running() and time.monotonic() < deadline:
            try:
                request = self.input_queue.get(timeout=seconds)
            except queue.Empty:
                return
            self._handle_client_request(*request)

    setattr(_process_input_queue, "_qdebug", True)
    setattr(core_class, "_process_input_queue", _process_input_queue)
    log.warning("qdebug: an idle engine gathers each burst until no request arrived for %.0f ms (%s)", seconds * 1000, ENV_GATHER)


class StepDelay:
    """A wait before each step that schedules new requests (their prefill); decode-only steps run at full speed."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def before(self, scheduler_output: Any) -> None:
        if getattr(scheduler_output, "scheduled_new_reqs", True):
            time.sleep(self.seconds)

    def after(self, scheduler_output: Any, output: Any) -> None:
        return None


def slow_steps(runner: Any, seconds: float) -> None:
    """Make each of the runner's steps that schedules new requests wait `seconds` first (inside vLLM's step, as the
    runner's StepHooks declare: the plugin's clock counts the wait as vLLM's)."""
    from .step_hooks import DELAY, hooks_of

    hooks_of(runner).subscribe(DELAY, StepDelay(seconds))
    log.warning("qdebug: each step that starts requests waits %.0f ms (%s)", seconds * 1000, ENV_STEP_DELAY)
