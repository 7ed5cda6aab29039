"""The engine core's clock (issue 48's cost must-hold): the scheduler's time is measured where the plugin wraps it
(`Scheduler.schedule`, `add_request`, `update_from_output`, the cache recording inside them included) and published
with the recording's own time as `core-<pid>.json` in the trace folder, which `benchmarks/engine.py` reads."""

from __future__ import annotations

import os
import time
from types import ModuleType, SimpleNamespace as NS

from qdebug.engine import cache_core
from qdebug.engine.cache_reads import MEDIA_ARG


class Scheduler:
    """vLLM's scheduler as the plugin wraps it: each call takes 2 ms of its own."""

    def add_request(self, request) -> None:
        time.sleep(0.002)

    def schedule(self, throttle_prefills: bool = False) -> str:
        time.sleep(0.002)
        return "output"

    def update_from_output(self, scheduler_output, model_output) -> dict:
        time.sleep(0.002)
        return {}


def test_the_scheduler_and_the_recording_are_timed_and_published_beside_the_traces(tmp_path, monkeypatch):
    monkeypatch.setenv("QDEBUG_VLLM_TRACE_DIR", str(tmp_path))
    ledger = cache_core.CacheLedger()
    monkeypatch.setattr(cache_core, "LEDGER", ledger)
    module = ModuleType("vllm.v1.core.sched.scheduler")
    module.Scheduler = type("Scheduler", (Scheduler,), {})
    cache_core.patch_scheduler(module)
    cache_core.patch_scheduler(module)  # once
    scheduler = module.Scheduler()
    image = NS(modality="image", identifier="h", mm_hash="h", mm_position=NS(offset=2, length=4))
    request = NS(request_id="r", mm_features=[image], sampling_params=NS(extra_args={MEDIA_ARG: {"prints": ["ab" * 8]}}))
    scheduler.add_request(request)
    assert scheduler.schedule() == "output" and scheduler.update_from_output("output", None) == {}
    assert ledger.calls == 1 and 0 < ledger.seconds < ledger.scheduler_seconds and ledger.scheduler_calls == 3
    assert ledger.scheduler_seconds >= 0.006  # the three calls' own 2 ms each, and the recording inside add_request
    path = tmp_path / f"core-{os.getpid()}.json"
    deadline = time.monotonic() + 10
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    core = cache_core.read_core(str(tmp_path))
    assert core == {"seconds": ledger.seconds, "calls": 1, "scheduler_seconds": ledger.scheduler_seconds, "scheduler_calls": 3}
