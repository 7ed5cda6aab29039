"""`qdebug watch URL_OR_DIR`: what the vLLM plugin's watch mode has counted and found, read from a server's /metrics (a
URL) or from its QDEBUG_VLLM_WATCH_DIR (the workers' counter files and the findings log); `--once` reads it once."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from qdebug.errors import InputError
from qdebug.vocab import WATCH_CHECKS

COUNTERS = ("checks", "violations", "errors", "seconds")
WORKER_KEYS = ("steps", "step_seconds", "plugin_seconds")  # the plugin's clock (engine/plugin_clock.py)
LATEST = 50  # findings a snapshot keeps (the newest)
DEFAULT_TIMEOUT = 10.0  # seconds a whole reading (a /metrics answer, a folder's files) may take
DEFAULT_MAX_MB = 64.0  # MiB: the largest /metrics answer (decompressed) and the largest findings-log file read


@dataclass
class WatchArgs:
    """What to read: a server URL (its /metrics) or a watch folder; `findings`: the folder of a URL's findings log."""

    source: str
    findings: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    max_mb: float = DEFAULT_MAX_MB


@dataclass
class WatchSnapshot:
    """The counters per check (checks, violations, errors, seconds) at one time, and the latest findings."""

    source: str
    time: float
    counters: dict[str, dict[str, float]]
    findings: list = field(default_factory=list)  # engine.watch_log.WatchFinding, newest last
    findings_total: int = 0  # finding lines in the log (all of them, not only those kept)
    findings_violations: int = 0  # of them, violations
    worker: dict[str, float] = field(default_factory=dict)  # steps, step_seconds, plugin_seconds (empty: not exported)
    counters_read: bool = True  # False: a folder without counter files (the total is the findings log's violation lines)
    reads: dict[str, float] = field(default_factory=dict)  # the cache check's reads: "cache/reuse" → reads

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
        return max(counted, self.findings_violations)

    @property
    def checks(self) -> list[str]:
        """Every check a row is shown for: the plugin's own (vocab.WATCH_CHECKS), then any other name the counters hold (so the total is
        what the rows add up to)."""
        known = [c.value for c in WATCH_CHECKS]
        return known + sorted({c for row in self.counters.values() for c in row} - set(known))

    def to_json(self) -> dict:
        """The snapshot as a JSON document (`qdebug watch --once --json`)."""
        checks = {c: {k: self.counters.get(k, {}).get(c, 0) for k in COUNTERS} for c in self.checks}
        worker = {**{k: self.worker.get(k, 0) for k in WORKER_KEYS}, "plugin_share": self.plugin_share}
        return {"source": self.source, "time": self.time, "violations": self.violations, "checks": checks, "worker": worker,
                "counters_read": self.counters_read, "findings_total": self.findings_total,
                "findings_violations": self.findings_violations, "cache_reads": self.cache_reads(),
                "findings": [f.to_json() for f in self.findings]}

    def cache_reads(self) -> dict[str, dict[str, int]]:
        """The cache check's reads per cache (those read at all, in the pipeline's order), by what was served:
        same_content, other_content, unverified."""
        from qdebug.vocab import CacheKind, CacheReuse

        out = {c.value: {r.value: int(self.reads.get(f"{c.value}/{r.value}", 0)) for r in CacheReuse} for c in CacheKind}
        return {cache: row for cache, row in out.items() if any(row.values())}


def is_url(source: str) -> bool:
    """Whether the source names a server (http:// or https://)."""
    return source.startswith(("http://", "https://"))


def check_source(args: WatchArgs) -> None:
    """A one-line InputError for a source that is neither a URL nor a folder, or a limit that is not positive."""
    from qdebug.shown import shown

    if not args.timeout > 0:
        raise InputError(f"--timeout {args.timeout}: expected a positive number of seconds")
    if not args.max_mb > 0:
        raise InputError(f"--max-mb {args.max_mb}: expected a positive number of MiB")
    for where, what in ((args.source, "URL_OR_DIR"), (args.findings, "--findings")):
        if where is None:
            continue
        if what == "URL_OR_DIR" and is_url(where):
            from .watch_scrape import check_url

            check_url(where)
        elif not os.path.isdir(where):
            raise InputError(f"{what} {shown(where, 300)!r}: not a server URL (http://HOST:PORT) nor a folder (expected the "
                             "server's QDEBUG_VLLM_WATCH_DIR)")


def read_snapshot(args: WatchArgs) -> WatchSnapshot:
    """One reading of the source within --timeout and --max-mb: counters and the latest findings (all counted)."""
    from .watch_folder import Deadline, counter_names, read_counter_files, tally_findings

    check_source(args)
    deadline = Deadline(args.timeout)
    url = is_url(args.source)
    folder = args.findings if url else args.source
    counters: dict[str, dict[str, float]] = {}
    worker: dict[str, float] = {}
    reads: dict[str, float] = {}
    if url:
        from .watch_scrape import scrape

        scraped = scrape(args.source, deadline, args.max_mb)
        counters, worker, reads = scraped.counters, scraped.worker, scraped.reads
    if folder is None:
        return WatchSnapshot(args.source, time.time(), counters, worker=worker, reads=reads)
    if url:  # the server's counts are its /metrics: the folder's counter files are only looked for
        workers = len(counter_names(folder, deadline))
    else:
        counted = read_counter_files(folder, deadline)
        counters, worker, workers, reads = counted.counters, counted.worker, counted.workers, counted.reads
    tally = tally_findings(folder, deadline, int(args.max_mb * 2**20), LATEST)
    if not workers and not tally.files:
        from qdebug.shown import shown

        raise InputError(f"{'--findings' if url else 'URL_OR_DIR'} {shown(folder, 300)}: holds no watch counter files "
                         "(metrics-*.json) and no findings.log (expected the QDEBUG_VLLM_WATCH_DIR of a vLLM started with "
                         "QDEBUG_VLLM_WATCH=1)")
    return WatchSnapshot(args.source, time.time(), counters, list(tally.latest), tally.total, tally.violations, worker,
                         counters_read=url or workers > 0, reads=reads)


def trace_file(args: WatchArgs, trace: str) -> str:
    """The file of a finding's recorded trace: its `trace` field is relative to the watch folder (the flight recorder
    writes `traces/NAME.qdt` there), or absolute when the trace folder is outside it. InputError for a relative path
    that leaves the folder, a source without a findings folder, or a name that is not a .qdt."""
    from qdebug.shown import shown

    folder = args.findings if is_url(args.source) else args.source
    if folder is None:
        raise InputError(f"trace {shown(trace, 300)}: {shown(args.source, 300)} names no watch folder (give --findings DIR)")
    path = os.path.normpath(trace if os.path.isabs(trace) else os.path.join(folder, trace))
    if not os.path.isabs(trace) and os.path.relpath(path, folder).startswith(".."):
        raise InputError(f"trace {shown(trace, 300)}: leaves the watch folder {shown(folder, 300)} (expected a path inside it, "
                         "as the flight recorder writes: traces/NAME.qdt)")
    if not path.endswith(".qdt"):
        raise InputError(f"trace {shown(trace, 300)}: not a .qdt trace")
    return path


def rates(before: WatchSnapshot, after: WatchSnapshot) -> dict[str, dict[str, float]]:
    """Per check, checks and violations per second between two snapshots."""
    span = max(after.time - before.time, 1e-9)
    out = {}
    for c in after.checks:
        out[c] = {k: max(after.counters.get(k, {}).get(c, 0) - before.counters.get(k, {}).get(c, 0), 0) / span
                  for k in ("checks", "violations", "errors")}
    return out
