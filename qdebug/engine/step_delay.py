"""A busy engine on demand (`QDEBUG_VLLM_STEP_DELAY_MS`): each model-runner step that starts new requests waits first.

On a small CPU server vLLM finishes a request before the front end has prepared the next one, so a burst of
concurrent requests never shares a step or an encoder call, and a batching bug cannot show. A loaded GPU server
queues what arrives during a step and schedules it together; this wait gives a test server the same queue. It changes
timing only, never a tensor, and is off unless the variable is set.
"""

from __future__ import annotations

import logging
import os
import time

ENV_STEP_DELAY = "QDEBUG_VLLM_STEP_DELAY_MS"

log = logging.getLogger("vllm.qdebug")


def requested_delay() -> float:
    """Seconds each step that starts requests waits (0 when unset); a bad value is logged and ignored."""
    raw = os.environ.get(ENV_STEP_DELAY, "").strip()
    if not raw:
        return 0.0
    try:
        ms = float(raw)
    except ValueError:
        ms = -1.0
    if not 0 <= ms <= 10_000:
        log.error("qdebug: %s=%s: expected milliseconds in 0..10000; no delay", ENV_STEP_DELAY, raw)
        return 0.0
    return ms / 1000


def slow_steps(runner, seconds: float) -> None:
    """Make `runner.execute_model` wait `seconds` before a step that schedules new requests (their prefill)."""
    execute = runner.execute_model

    def execute_model(scheduler_output, *args, **kwargs):
        if getattr(scheduler_output, "scheduled_new_reqs", True):  # decode-only steps run at full speed
            time.sleep(seconds)
        return execute(scheduler_output, *args, **kwargs)

    runner.execute_model = execute_model
    log.warning("qdebug: each step that starts requests waits %.0f ms (%s)", seconds * 1000, ENV_STEP_DELAY)
