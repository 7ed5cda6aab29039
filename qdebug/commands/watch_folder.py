"""`qdebug watch DIR`'s readers of a watch folder: the workers' counter files and the findings log. Each is a regular
file (a FIFO or a device is refused before it is read: it could block or never end), read within a size cap and the
reading's deadline (`--timeout`); the log is streamed, every line counted and only the newest findings kept."""

from __future__ import annotations

import fnmatch
import json
import math
import os
import stat
import time
from collections import deque
from dataclasses import dataclass, field
from typing import BinaryIO

from qdebug.errors import InputError
from qdebug.input_files import file_kind
from qdebug.shown import shown
from qdebug.vocab import WatchOutcome

COUNTER_PATTERN = "metrics-*-*.json"  # engine/watch_metrics.py: one file per worker
COUNTER_SERIES = ("checks", "violations", "errors", "seconds")
CLOCK = {"steps": "steps", "step_seconds": "step_seconds", "own_seconds": "plugin_seconds"}  # file key → snapshot key
MAX_COUNTER_BYTES = 1 << 20  # a worker's counter file is about 1 KiB
MAX_COUNTER_FILES = 1024  # workers of one folder (data-parallel ranks, restarts)
MAX_CHECKS = 64  # distinct check names over the files (the plugin has seven)
MAX_LINE = 64 << 10  # bytes of a findings line kept; the writer's lines are under 4 KiB (a longer one is cut)
LOG_NAMES = ("findings.log.1", "findings.log")  # engine/watch_log.py: the rotated file, then the current one
CHECK_EVERY = 4096  # lines between looks at the clock


class Deadline:
    """The time a whole reading must end by (`--timeout`)."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.end = seconds, time.monotonic() + seconds

    def left(self) -> float:
        """Seconds left (never below a millisecond: a fetch given them fails at once rather than waiting)."""
        return max(self.end - time.monotonic(), 0.001)

    def check(self, what: str, expected: str = "a watch folder on a local disk; raise --timeout for a slow one") -> None:
        """A one-line InputError when the reading has run past its deadline."""
        if time.monotonic() > self.end:
            raise InputError(f"{shown(what, 300)}: not read within {self.seconds:g} s (--timeout) (expected {expected})")


@dataclass
class FolderCounters:
    """The counter files of a folder summed: series → check → value, the worker clock, how many files."""

    counters: dict[str, dict[str, float]] = field(default_factory=dict)
    worker: dict[str, float] = field(default_factory=dict)
    workers: int = 0
    reads: dict[str, float] = field(default_factory=dict)  # the cache check's reads, "cache/reuse" → reads


@dataclass
class LogTally:
    """A folder's findings log read through: every finding line counted, the newest `keep` kept (oldest first)."""

    latest: deque = field(default_factory=deque)  # engine.watch_log.WatchFinding
    total: int = 0
    violations: int = 0
    files: int = 0


def open_regular(path: str, expected: str) -> BinaryIO | None:
    """`path` opened for reading when it is a regular file (links followed), None when it does not exist; a FIFO,
    device, socket or folder is a one-line InputError, judged on the opened file itself (no race with a swap)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO opens at once instead of blocking
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InputError(f"{shown(path, 300)}: cannot be read ({exc.strerror or type(exc).__name__}) (expected {expected})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        kind = file_kind(path) or "not a regular file"
        raise InputError(f"{shown(path, 300)} is {kind}, not a regular file (expected {expected})")
    return os.fdopen(fd, "rb")


def counter_names(folder: str, deadline: Deadline) -> list[str]:
    """The names of the workers' counter files in `folder`, sorted (at most MAX_COUNTER_FILES, else InputError)."""
    names = []
    try:
        with os.scandir(folder) as entries:
            for k, entry in enumerate(entries):
                if k % CHECK_EVERY == 0:
                    deadline.check(folder)
                if fnmatch.fnmatchcase(entry.name, COUNTER_PATTERN):
                    names.append(entry.name)
                    if len(names) > MAX_COUNTER_FILES:
                        raise InputError(f"{shown(folder, 300)}: more than {MAX_COUNTER_FILES} counter files "
                                         f"({COUNTER_PATTERN}) (expected one per vLLM worker)")
    except OSError as exc:
        raise InputError(f"{shown(folder, 300)}: cannot be listed ({exc.strerror or type(exc).__name__})") from None
    return sorted(names)


def read_counter_files(folder: str, deadline: Deadline) -> FolderCounters:
    """The workers' counter files of `folder` summed; a file that is not a counter file is a one-line InputError."""
    out = FolderCounters()
    for name in counter_names(folder, deadline):
        path = os.path.join(folder, name)
        deadline.check(path)
        doc = _counter_doc(path)
        if doc is None:
            continue  # gone since the listing (a worker's file replaced as it was listed)
        _add_counters(out, doc, path)
        out.workers += 1
    return out


def _counter_doc(path: str) -> dict | None:
    """A counter file's JSON object (None: gone since the listing); over the cap, not JSON, NaN: InputError."""
    expected = "the plugin's counter file: a JSON object of finite counts, about 1 KiB"
    fh = open_regular(path, expected)
    if fh is None:
        return None
    with fh:
        data = fh.read(MAX_COUNTER_BYTES + 1)
    if len(data) > MAX_COUNTER_BYTES:
        raise InputError(f"{shown(path, 300)}: over {MAX_COUNTER_BYTES >> 20} MiB (expected {expected})")

    def no_constant(word: str) -> float:
        raise ValueError(f"{word} is not a count")

    try:
        doc = json.loads(data, parse_constant=no_constant)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{shown(path, 300)}: not a counter file ({shown(exc, 120)}) (expected {expected})") from None
    if not isinstance(doc, dict):
        raise InputError(f"{shown(path, 300)}: not a counter file (a JSON {type(doc).__name__}) (expected {expected})")
    return doc


def _add_counters(out: FolderCounters, doc: dict, path: str) -> None:
    """Add one file's counts (each a finite number ≥ 0) to the sums."""
    for series in COUNTER_SERIES:
        values = doc.get(series) or {}
        if not isinstance(values, dict):
            raise InputError(f"{shown(path, 300)}: {series!r} is not an object of counts (expected the plugin's counter file)")
        row = out.counters.setdefault(series, {})
        for check, value in values.items():
            row[check] = row.get(check, 0.0) + _count(value, path, f"{series}.{check}")
        if len({c for r in out.counters.values() for c in r}) > MAX_CHECKS:
            raise InputError(f"{shown(path, 300)}: more than {MAX_CHECKS} check names (expected the plugin's checks)")
    reads = doc.get("reads") or {}
    if isinstance(reads, dict):
        from qdebug.engine.watch_metrics import READS

        for kind in READS:  # the words the plugin writes, and no other key
            if kind in reads:
                out.reads[kind] = out.reads.get(kind, 0.0) + _count(reads[kind], path, f"reads.{kind}")
    clock = doc.get("clock") or {}
    if isinstance(clock, dict):
        for key, name in CLOCK.items():
            if key in clock:
                out.worker[name] = out.worker.get(name, 0.0) + _count(clock[key], path, f"clock.{key}")


def _count(value: object, path: str, where: str) -> float:
    """A counter file's count as a finite float ≥ 0, else a one-line InputError naming the file and the field."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value) if not isinstance(value, int) or abs(value) < 1 << 1000 else math.inf
        if math.isfinite(number) and number >= 0:
            return number
    raise InputError(f"{shown(path, 300)}: {shown(where, 120)} is {shown(repr(value), 40)}, not a finite count (expected "
                     "a number ≥ 0; the plugin never writes NaN, Infinity or negative counts)")


def tally_findings(folder: str, deadline: Deadline, max_bytes: int, keep: int) -> LogTally:
    """The findings log of `folder` (the rotated file first) streamed: lines counted, the newest `keep` findings kept;
    a file over `max_bytes` or not a regular file is a one-line InputError."""
    tally = LogTally(latest=deque(maxlen=keep))
    for name in LOG_NAMES:
        path = os.path.join(folder, name)
        fh = open_regular(path, "the plugin's findings log, a regular file")
        if fh is None:
            continue
        with fh:
            size = os.fstat(fh.fileno()).st_size
            if size > max_bytes:
                raise InputError(f"{shown(path, 300)}: {size / 2**20:,.1f} MiB, over --max-mb {max_bytes / 2**20:g} (expected "
                                 "a findings log the plugin bounds at QDEBUG_VLLM_WATCH_LOG_MB; raise --max-mb to read it)")
            _tally_file(fh, tally, deadline, path, max_bytes)
        tally.files += 1
    return tally


def _tally_file(fh: BinaryIO, tally: LogTally, deadline: Deadline, path: str, max_bytes: int) -> None:
    from qdebug.engine.watch_log import parse_line

    read = 0
    for number, (head, length) in enumerate(_lines(fh), 1):
        read += length
        if number % CHECK_EVERY == 0:
            deadline.check(path)
        text = head.decode("utf-8", "replace")
        finding = parse_line(text) if length == len(head) else _cut_finding(text, parse_line)
        if finding is not None:
            tally.total += 1
            tally.violations += finding.outcome == WatchOutcome.VIOLATION
            tally.latest.append(finding)
        if read >= max_bytes:  # it grew while read: what the cap allows has been read
            break


def _lines(fh: BinaryIO):
    """(the line's first MAX_LINE bytes, its length) per line; the rest of a longer line is read past, never held."""
    while True:
        head = fh.readline(MAX_LINE)
        if not head:
            return
        length = len(head)
        if length == MAX_LINE and not head.endswith(b"\n"):
            while True:
                rest = fh.readline(MAX_LINE)
                length += len(rest)
                if not rest or rest.endswith(b"\n"):
                    break
        yield head, length


def _cut_finding(head: str, parse_line):
    """The finding of a line cut at MAX_LINE: its complete fields (the cut one dropped), its evidence marked cut."""
    complete = head.rsplit(" ", 1)[0]
    finding = parse_line(complete if " evidence=" in complete else complete + " evidence=")
    if finding is not None:
        finding.evidence = f"{finding.evidence} … (line over {MAX_LINE >> 10} KiB, cut)".lstrip()
    return finding
