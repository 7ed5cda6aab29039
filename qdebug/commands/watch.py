"""`qdebug watch URL_OR_DIR`: what the vLLM plugin's watch mode has counted and found, read from a server's /metrics (a
URL) or from its QDEBUG_VLLM_WATCH_DIR (the workers' counter files and the findings log); `--once` reads it once."""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field

from qdebug.errors import InputError, UnreachableError
from qdebug.vocab import WATCH_CHECKS, WatchOutcome

SERIES = {"qdebug_watch_checks_total": "checks", "qdebug_watch_violations_total": "violations",
          "qdebug_watch_errors_total": "errors", "qdebug_watch_check_seconds_total": "seconds"}
_SAMPLE = re.compile(r'^(qdebug_watch_\w+)\{check="([^"]{1,64})"\} ([0-9.eE+-]+|NaN|[+-]Inf)\s*$', re.M)
WORKER = {"qdebug_watch_worker_steps_total": "steps", "qdebug_watch_worker_step_seconds_total": "step_seconds",
          "qdebug_watch_plugin_seconds_total": "plugin_seconds"}  # the plugin's clock (engine/plugin_clock.py)
_PLAIN = re.compile(r'^(qdebug_watch_\w+) ([0-9.eE+-]+)\s*$', re.M)
LATEST = 50  # findings a snapshot keeps (the newest)


@dataclass
class WatchArgs:
    """What to read: a server URL (its /metrics) or a watch folder; `findings`: the folder of a URL's findings log."""

    source: str
    findings: str | None = None
    timeout: float = 10.0


@dataclass
class WatchSnapshot:
    """The counters per check (checks, violations, errors, seconds) at one time, and the latest findings."""

    source: str
    time: float
    counters: dict[str, dict[str, float]]
    findings: list = field(default_factory=list)  # engine.watch_log.WatchFinding, newest last
    findings_total: int = 0
    worker: dict[str, float] = field(default_factory=dict)  # steps, step_seconds, plugin_seconds (empty: not exported)

    @property
    def plugin_share(self) -> float | None:
        """The plugin's time over vLLM's own in the worker's steps (0.02: the step loop runs 2% longer), or None."""
        from qdebug.engine.plugin_clock import share

        if not self.worker.get("steps"):
            return None
        return share(self.worker.get("plugin_seconds", 0.0), self.worker.get("step_seconds", 0.0))

    @property
    def violations(self) -> int:
        """Violations counted over every check (or, without counters, violation lines in the findings log)."""
        counted = int(sum(self.counters.get("violations", {}).values()))
        logged = sum(1 for f in self.findings if f.outcome == WatchOutcome.VIOLATION)
        return max(counted, logged)

    def to_json(self) -> dict:
        """The snapshot as a JSON document (`qdebug watch --once --json`)."""
        checks = {c.value: {k: self.counters.get(k, {}).get(c.value, 0) for k in ("checks", "violations", "errors", "seconds")}
                  for c in WATCH_CHECKS}
        worker = {**{k: self.worker.get(k, 0) for k in WORKER.values()}, "plugin_share": self.plugin_share}
        return {"source": self.source, "time": self.time, "violations": self.violations, "checks": checks, "worker": worker,
                "findings_total": self.findings_total, "findings": [f.to_json() for f in self.findings]}


def is_url(source: str) -> bool:
    """Whether the source names a server (http:// or https://)."""
    return source.startswith(("http://", "https://"))


def check_source(args: WatchArgs) -> None:
    """A one-line InputError for a source that is neither a URL nor a watch folder."""
    for where, what in ((args.source, "URL_OR_DIR"), (args.findings, "--findings")):
        if where is None or (what == "URL_OR_DIR" and is_url(where)):
            continue
        if not os.path.isdir(where):
            raise InputError(f"{what} {where!r}: not a server URL (http://HOST:PORT) nor a folder (expected the server's "
                             "QDEBUG_VLLM_WATCH_DIR)")


def read_snapshot(args: WatchArgs) -> WatchSnapshot:
    """One reading of the source: counters and the latest findings."""
    from qdebug.engine.watch_log import read_findings
    from qdebug.engine.watch_metrics import read_counters

    check_source(args)
    if is_url(args.source):
        counters, worker = scrape(args.source, args.timeout)
        folder = args.findings
    else:
        counted = read_counters(args.source)
        counters = {k: counted[k] for k in ("checks", "violations", "errors", "seconds")} if counted["workers"] else {}
        clock = counted["clock"]
        worker = {"steps": clock["steps"], "step_seconds": clock["step_seconds"], "plugin_seconds": clock["own_seconds"]}
        folder = args.source
    found = read_findings(folder) if folder else []
    return WatchSnapshot(args.source, time.time(), counters, found[-LATEST:], len(found), worker)


def scrape(url: str, timeout: float) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """The qdebug_watch_* series on a server's /metrics: series → check → value, and the worker clock's series."""
    import httpx

    target = url.rstrip("/") if url.rstrip("/").endswith("/metrics") else url.rstrip("/") + "/metrics"
    try:
        response = httpx.get(target, timeout=timeout)
    except httpx.HTTPError as exc:
        raise UnreachableError(f"cannot reach {target} ({type(exc).__name__}); is the vLLM server running?") from None
    if response.status_code != 200:
        raise InputError(f"{target} answered HTTP {response.status_code} (expected 200 and Prometheus text)")
    counters: dict[str, dict[str, float]] = {}
    for name, check, value in _SAMPLE.findall(response.text):
        if name in SERIES:
            counters.setdefault(SERIES[name], {})[check] = float(value)
    if not counters:
        raise InputError(f"{target} exports no qdebug_watch_* series (expected a vLLM started with QDEBUG_VLLM_WATCH=1 "
                         "and qdebug's plugin installed)")
    worker = {WORKER[name]: float(value) for name, value in _PLAIN.findall(response.text) if name in WORKER}
    return counters, worker


def rates(before: WatchSnapshot, after: WatchSnapshot) -> dict[str, dict[str, float]]:
    """Per check, checks and violations per second between two snapshots."""
    span = max(after.time - before.time, 1e-9)
    out = {}
    for c in WATCH_CHECKS:
        out[c.value] = {k: max(after.counters.get(k, {}).get(c.value, 0) - before.counters.get(k, {}).get(c.value, 0), 0) / span
                        for k in ("checks", "violations", "errors")}
    return out
