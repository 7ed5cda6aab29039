"""The watch's counters: counted in the worker, written to `DIR/metrics-<run>-<pid>.json` (atomically, at most twice a
second), and served on vLLM's own /metrics by a collector the front end registers (the worker's own prometheus
registry is served by no one; see shared/DESIGN.md "Metrics"). Each worker (data-parallel engines each have one)
writes its own file; the collector sums the files of its run.

Series (the `check` label is a `vocab.WatchCheck` word):
- `qdebug_watch_checks_total{check}`: checks run;
- `qdebug_watch_violations_total{check}`: checks that found their invariant broken;
- `qdebug_watch_errors_total{check}`: checks that raised (the request was answered as without the watch);
- `qdebug_watch_check_seconds_total{check}`: seconds spent in the check (worker wall time);
- `qdebug_watch_findings_dropped_total`: findings-log lines dropped (queue full or disk error);
- `qdebug_watch_worker_steps_total`, `qdebug_watch_worker_step_seconds_total`: the worker's steps and their wall time
  (`execute_model` as vLLM's engine calls it, the plugin's wrappers included);
- `qdebug_watch_plugin_seconds_total`: the plugin's own part of that time (engine/plugin_clock.py): its share of the
  step is what the watch costs in requests/s.
"""

from __future__ import annotations

import glob
import json
import os
import threading
import time

from qdebug.vocab import WATCH_CHECKS

from .plugin_clock import NoClock, PluginClock

SERIES = ("checks", "violations", "errors", "seconds")
CLOCK = ("steps", "step_seconds", "own_seconds")  # PluginClock.snapshot's keys
FLUSH_SECONDS = 0.5


class WatchCounters:
    """Per-check counts and seconds of one worker; thread-safe; `flush` writes them when they changed."""

    def __init__(self, folder: str, run: str, clock: PluginClock | NoClock | None = None) -> None:
        self.clock = clock if isinstance(clock, PluginClock) else None  # the worker's, when it has one
        self.clock_steps = -1  # its steps at the last write
        self.path = os.path.join(folder, f"metrics-{run or 'local'}-{os.getpid()}.json")
        self.lock = threading.Lock()
        self.values: dict[str, dict[str, float]] = {s: {c.value: 0 for c in WATCH_CHECKS} for s in SERIES}
        self.values["seconds"] = {c.value: 0.0 for c in WATCH_CHECKS}
        self.dropped = 0
        self.dirty = True
        self.thread = threading.Thread(target=self._loop, name="qdebug-watch-metrics", daemon=True)
        self.thread.start()

    def add(self, check: str, *, seconds: float, violations: int = 0, error: bool = False) -> None:
        """One run of `check`: its cost, whether it found violations (counted once per run) or raised."""
        with self.lock:
            v = self.values
            v["checks"][check] += 1
            v["seconds"][check] += seconds
            v["violations"][check] += 1 if violations else 0
            v["errors"][check] += 1 if error else 0
            self.dirty = True

    def set_dropped(self, dropped: int) -> None:
        """The findings log's dropped lines so far."""
        with self.lock:
            if dropped != self.dropped:
                self.dropped, self.dirty = dropped, True

    def snapshot(self) -> dict:
        """A copy of the counters (JSON-ready)."""
        clock = self.clock.snapshot() if self.clock is not None else {}
        with self.lock:
            return {**{s: dict(self.values[s]) for s in SERIES}, "dropped": self.dropped, "clock": clock, "pid": os.getpid(),
                    "time": time.time()}

    def flush(self) -> None:
        """Write the counters (write beside, rename into place) when they changed since the last write."""
        steps = self.clock.steps if self.clock is not None else -1
        with self.lock:
            if not self.dirty and steps == self.clock_steps:
                return
            self.dirty, self.clock_steps = False, steps
        doc = self.snapshot()
        tmp = f"{self.path}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(doc, fh)
        os.replace(tmp, self.path)

    def _loop(self) -> None:
        while True:
            time.sleep(FLUSH_SECONDS)
            try:
                self.flush()
            except OSError:
                with self.lock:
                    self.dirty = True


def read_counters(folder: str, run: str | None = None) -> dict:
    """The summed counters of the workers' files in `folder` (those of `run` when given): series → check → value,
    and `dropped`; unreadable or half-written files are skipped."""
    total: dict[str, dict[str, float]] = {s: {c.value: 0 for c in WATCH_CHECKS} for s in SERIES}
    total["seconds"] = {c.value: 0.0 for c in WATCH_CHECKS}
    dropped, files = 0, 0
    clock = dict.fromkeys(CLOCK, 0.0)
    for path in sorted(glob.glob(os.path.join(glob.escape(folder), f"metrics-{run or '*'}-*.json"))):
        try:
            with open(path, encoding="utf-8") as fh:
                doc = json.load(fh)
            for s in SERIES:
                for check, value in (doc.get(s) or {}).items():
                    if check in total[s] and isinstance(value, (int, float)):
                        total[s][check] += value
            dropped += int(doc.get("dropped", 0) or 0)
            for key, value in (doc.get("clock") or {}).items():
                if key in clock and isinstance(value, (int, float)):
                    clock[key] += value
            files += 1
        except (OSError, ValueError, TypeError, AttributeError):
            continue
    return {**total, "dropped": dropped, "clock": clock, "workers": files}


class WatchCollector:
    """A prometheus_client collector (front end): the workers' counters, read from their files at each scrape."""

    def __init__(self, folder: str, run: str) -> None:
        self.folder, self.run = folder, run

    def collect(self):
        from prometheus_client.core import CounterMetricFamily

        counters = read_counters(self.folder, self.run)
        helps = {"checks": "qdebug watch checks run", "violations": "qdebug watch checks that found their invariant broken",
                 "errors": "qdebug watch checks that raised (the request was answered unchanged)",
                 "seconds": "seconds the qdebug watch checks cost in the worker"}
        names = {"checks": "qdebug_watch_checks", "violations": "qdebug_watch_violations", "errors": "qdebug_watch_errors",
                 "seconds": "qdebug_watch_check_seconds"}
        for series in SERIES:
            family = CounterMetricFamily(names[series], helps[series], labels=["check"])
            for check, value in counters[series].items():
                family.add_metric([check], value)
            yield family
        dropped = CounterMetricFamily("qdebug_watch_findings_dropped", "qdebug watch findings-log lines dropped")
        dropped.add_metric([], counters["dropped"])
        yield dropped
        clock = counters["clock"]
        for name, key, text in (("qdebug_watch_worker_steps", "steps", "steps vLLM's worker ran (execute_model calls)"),
                                ("qdebug_watch_worker_step_seconds", "step_seconds",
                                 "wall seconds of those steps, qdebug's plugin included"),
                                ("qdebug_watch_plugin_seconds", "own_seconds",
                                 "wall seconds qdebug's plugin spent in those steps (bookkeeping, batch log, checks)")):
            family = CounterMetricFamily(name, text)
            family.add_metric([], clock[key])
            yield family

    def describe(self):
        return []  # no names at registration: the registry then never calls collect() to learn them


_REGISTERED: list = []


def serve_counters(folder: str, run: str) -> None:
    """Register the collector in this process's default prometheus registry (once)."""
    if _REGISTERED:
        return
    from prometheus_client import REGISTRY

    collector = WatchCollector(folder, run)
    REGISTRY.register(collector)
    _REGISTERED.append(collector)
