"""The watch's counters: counted in the worker, written to `DIR/metrics-<run>-<pid>.json` (atomically, at most twice a
second), and served on vLLM's own /metrics by a collector the front end registers (the worker's own prometheus
registry is served by no one; see shared/DESIGN.md "Metrics"). Each worker (data-parallel engines each have one)
writes its own file; the collector sums the files of its run.

Series (the `check` label is a `vocab.WatchCheck` word):
- `qdebug_watch_checks_total{check}`: checks run;
- `qdebug_watch_violations_total{check}`: checks that found their invariant broken;
- `qdebug_watch_cache_reads_total{cache, reuse}`: the cache reads the `cache` check judged, by cache and by what was
  served (`vocab.CacheKind`, `vocab.CacheReuse`: `unverified` ones are no violation, and are counted only here);
- `qdebug_watch_errors_total{check}`: checks that raised (the request was answered as without the watch);
- `qdebug_watch_check_seconds_total{check}`: seconds spent in the check (worker wall time);
- `qdebug_watch_findings_dropped_total`: findings-log lines dropped (queue full or disk error);
- `qdebug_watch_worker_steps_total`, `qdebug_watch_worker_step_seconds_total`: the worker's steps and their wall time
  (`execute_model` as vLLM's engine calls it, the plugin's step hooks included);
- `qdebug_watch_plugin_seconds_total`: the plugin's own part of that time (engine/plugin_clock.py): its share of the
  step is what the watch costs in requests/s;
- `qdebug_watch_up`: 1 when a worker of this server's run has written its counters (the watch runs), else 0 and no
  other qdebug_watch_* series: a watch that failed to attach (its folder a file, a dangling link) never looks like a
  healthy one with nothing found.

A counter file is read only when it is a regular file of the folder (no link, no FIFO), at most `MAX_FILE_BYTES`,
and every value in it a finite number from 0 to `MAX_VALUE`; any other is skipped (said once in vLLM's log), and
nothing in the collector ever raises into the server's /metrics (vLLM's own series are served whatever the folder
holds).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import threading
import time

from qdebug.vocab import WATCH_CHECKS, CacheKind, CacheReuse

from .plugin_clock import NoClock, PluginClock

log = logging.getLogger("vllm.qdebug")
SERIES = ("checks", "violations", "errors", "seconds")
CLOCK = ("steps", "step_seconds", "own_seconds")  # PluginClock.snapshot's keys
READS = tuple(f"{c.value}/{r.value}" for c in CacheKind for r in CacheReuse)  # the counter file's `reads` keys: cache/reuse
FLUSH_SECONDS = 0.5
MAX_FILE_BYTES = 64 << 10  # a worker's counter file is under 2 KiB
MAX_VALUE = float(1 << 53)  # counts and seconds beyond it are not a worker's (and lose integer precision)


class WatchCounters:
    """Per-check counts and seconds of one worker; thread-safe; `flush` writes them when they changed."""

    def __init__(self, folder: str, run: str, clock: PluginClock | NoClock | None = None) -> None:
        self.clock = clock if isinstance(clock, PluginClock) else None  # the worker's, when it has one
        self.clock_steps = -1  # its steps at the last write
        self.path = os.path.join(folder, f"metrics-{run or 'local'}-{os.getpid()}.json")
        self.lock = threading.Lock()
        self.values: dict[str, dict[str, float]] = {s: {c.value: 0 for c in WATCH_CHECKS} for s in SERIES}
        self.values["seconds"] = {c.value: 0.0 for c in WATCH_CHECKS}
        self.reads: dict[str, int] = dict.fromkeys(READS, 0)
        self.dropped = 0
        self.dirty = True
        self.thread = threading.Thread(target=self._loop, name="qdebug-watch-metrics", daemon=True)

    def start(self) -> None:
        """Write the counters from now on (at most twice a second): once the watch is attached, never before, so
        a watch that failed to attach has no counter file and /metrics says `qdebug_watch_up 0`."""
        if not self.thread.is_alive():
            self.thread.start()

    def add(self, check: str, *, seconds: float, violations: int = 0, error: bool = False, checks: int = 1) -> None:
        """One run of `check` that made `checks` checks (the cache check: one per read): its cost, how many of them
        found a violation (a run of one check counts one however many findings it has), or that it raised (each of
        its checks counted as an error)."""
        with self.lock:
            v = self.values
            v["checks"][check] = v["checks"].get(check, 0) + checks  # a registered check outside vocab too
            v["seconds"][check] = v["seconds"].get(check, 0.0) + seconds
            v["violations"][check] = v["violations"].get(check, 0) + min(violations, checks)
            v["errors"][check] = v["errors"].get(check, 0) + (checks if error else 0)
            self.dirty = True

    def add_reads(self, kinds: list[str]) -> None:
        """Cache reads judged, each as `cache/reuse` (READS)."""
        with self.lock:
            for kind in kinds:
                if kind in self.reads:
                    self.reads[kind] += 1
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
            return {**{s: dict(self.values[s]) for s in SERIES}, "reads": dict(self.reads), "dropped": self.dropped,
                    "clock": clock, "pid": os.getpid(), "time": time.time()}

    def flush(self) -> None:
        """Write the counters (write beside, rename into place) when they changed since the last write."""
        steps = self.clock.steps if self.clock is not None else -1
        with self.lock:
            if not self.dirty and steps == self.clock_steps:
                return
            self.dirty, self.clock_steps = False, steps
        data = json.dumps(self.snapshot()).encode()
        tmp = f"{self.path}.tmp"
        try:
            os.unlink(tmp)  # a name of the worker's own: made anew, never written through a link or into another file
        except FileNotFoundError:
            pass
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)

    def _loop(self) -> None:
        said = False
        while True:
            time.sleep(FLUSH_SECONDS)
            try:
                self.flush()
            except Exception as exc:  # a full disk: written again at the next turn (said once)
                with self.lock:
                    self.dirty = True
                if not said:
                    said = True
                    log.warning("qdebug: watch counters %s not written (%s: %s); retried every %s s", self.path,
                                type(exc).__name__, exc, FLUSH_SECONDS)


def read_counters(folder: str, run: str | None = None) -> dict:
    """The summed counters of the workers' files in `folder` (those of `run` when given): series → check → value,
    `dropped`, `clock`, and `workers` (files read); a file that is not a worker's (unreadable, half-written, a link or
    FIFO, too large, a value not a finite number in range) is skipped and said once in the log."""
    total: dict[str, dict[str, float]] = {s: {c.value: 0 for c in WATCH_CHECKS} for s in SERIES}
    total["seconds"] = {c.value: 0.0 for c in WATCH_CHECKS}
    dropped, files = 0, 0
    clock = dict.fromkeys(CLOCK, 0.0)
    reads = dict.fromkeys(READS, 0)
    for name in _counter_files(folder, run):
        try:
            doc = _read_file(folder, name)
        except (OSError, ValueError, TypeError, RecursionError) as exc:
            _say_skipped(os.path.join(folder, name), exc)
            continue
        for s in SERIES:
            for check, value in doc[s].items():
                if check in total[s]:
                    total[s][check] += value
        dropped += int(doc["dropped"])
        for key, value in doc["clock"].items():
            if key in clock:
                clock[key] += value
        for key, value in doc["reads"].items():
            if key in reads:
                reads[key] += value
        files += 1
    return {**total, "reads": reads, "dropped": dropped, "clock": clock, "workers": files}


def _counter_files(folder: str, run: str | None) -> list[str]:
    """The names of the counter files of `run` (any run when None) in `folder`, sorted."""
    pattern = re.compile(rf"metrics-{re.escape(run) if run else '.+'}-[0-9]+\.json")
    try:
        return sorted(n for n in os.listdir(folder) if pattern.fullmatch(n))
    except OSError:
        return []


def _read_file(folder: str, name: str) -> dict:
    """One worker's counters, checked: ValueError naming what is wrong with them."""
    from .trace_dir import open_own

    fd = open_own(folder, name)  # no link, no FIFO, one name (the worker renames its file into place)
    with open(fd, "rb", closefd=True) as fh:
        data = fh.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise ValueError(f"more than {MAX_FILE_BYTES} bytes")
    doc = json.loads(data)
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    out: dict = {s: _numbers(doc.get(s), s) for s in SERIES}
    out["clock"] = _numbers(doc.get("clock"), "clock")
    out["reads"] = _numbers(doc.get("reads"), "reads")  # absent in an older plugin's file
    out["dropped"] = _number(doc.get("dropped", 0), "dropped")
    return out


def _numbers(given: object, where: str) -> dict[str, float]:
    if given is None:
        return {}
    if not isinstance(given, dict):
        raise ValueError(f"{where} is not an object")
    return {str(k): _number(v, f"{where}.{k}") for k, v in given.items()}


def _number(value: object, where: str) -> float:
    """A count or seconds as a worker writes it: a finite number from 0 to MAX_VALUE (else ValueError)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where[:80]} is not a number")
    if isinstance(value, int) and not 0 <= value <= MAX_VALUE:  # compared as int: 10**400 never becomes a float
        raise ValueError(f"{where[:80]} is out of range")
    if isinstance(value, float) and not (math.isfinite(value) and 0 <= value <= MAX_VALUE):
        raise ValueError(f"{where[:80]} is {value!r}, not a finite number from 0 to 2**53")
    return value  # an int stays an int: counts read back as they were written


_SKIPPED: set[str] = set()  # counter files already said to be skipped (a scrape every few seconds says each once)


def _say_skipped(path: str, exc: BaseException) -> None:
    if path in _SKIPPED or len(_SKIPPED) > 1000:
        return
    _SKIPPED.add(path)
    from qdebug.shown import shown

    log.warning("qdebug: watch counters %s skipped (%s: %s); expected a worker's counter file", shown(path, 300),
                type(exc).__name__, shown(exc, 200))


class WatchCollector:
    """A prometheus_client collector (front end): the workers' counters, read from their files at each scrape.

    `qdebug_watch_up` is 1 and every other series follows when a worker of this run has written its counters; else
    `qdebug_watch_up 0` alone. Nothing raises out of `collect`: the registry serves vLLM's own series whatever the
    folder holds (an error is said once in the log, and the scrape gets `qdebug_watch_up 0`)."""

    def __init__(self, folder: str, run: str) -> None:
        self.folder, self.run = folder, run
        self.failed = False  # a collect error already said

    def collect(self):
        try:
            families = list(self._families())
        except Exception as exc:  # never the server's /metrics: vLLM's series are served without ours
            if not self.failed:
                self.failed = True
                log.warning("qdebug: watch counters not served (%s: %s); /metrics says qdebug_watch_up 0",
                            type(exc).__name__, str(exc)[:200])
            families = []
            try:
                families = [_up(0)]
            except Exception:  # prometheus_client itself failing: nothing of ours, vLLM's series still served
                pass
        yield from families

    def _families(self):
        from prometheus_client.core import CounterMetricFamily

        counters = read_counters(self.folder, self.run)
        if not counters["workers"]:
            yield _up(0)
            return
        yield _up(1)
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
        reads = CounterMetricFamily("qdebug_watch_cache_reads", "cache reads the qdebug watch's cache check judged, by cache "
                                    "and by what was served (same_content, other_content, unverified)", labels=["cache", "reuse"])
        for key, value in counters["reads"].items():
            reads.add_metric(key.split("/", 1), value)
        yield reads
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


def _up(value: int):
    """The `qdebug_watch_up` gauge: whether a worker's counters reach this /metrics."""
    from prometheus_client.core import GaugeMetricFamily

    return GaugeMetricFamily("qdebug_watch_up", "1 when qdebug's watch runs in a worker of this server (its counters "
                             "are read), 0 when it does not (see vLLM's log)", value=value)


_REGISTERED: list = []


def serve_counters(folder: str, run: str) -> None:
    """Register the collector in this process's default prometheus registry (once)."""
    if _REGISTERED:
        return
    from prometheus_client import REGISTRY

    collector = WatchCollector(folder, run)
    REGISTRY.register(collector)
    _REGISTERED.append(collector)
