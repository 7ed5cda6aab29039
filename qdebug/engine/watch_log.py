"""The watch's findings log: one line per violation (or failed check), appended to `DIR/findings.log`, rotated to
`findings.log.1` when it passes its bound (so the folder holds at most twice the bound).

The line format (documented in docs/watch.md; `parse_line` reads it back):

    2026-12-04T18:50:01.123456Z ERROR qdebug.watch: host=H check=placement outcome=violation stage=sync
        request_id=R client_id=C donors=A,B cobatched=X,Y trace=NAME evidence=free text to the end of the line

(one line). Every field but `evidence` is `key=value` with the value percent-encoded (space, `,`, `=`, `%` and
non-printing characters); list fields join encoded items with `,`; `-` is an empty value. The level is ERROR for a
violation and WARNING for a check that raised (`outcome=error`).

Ids are the client's (OpenAI `request_id`, `X-Request-Id`, `qdebug_id`), so every field is capped before it is queued
(and again as it is written): a value at most `MAX_FIELD_BYTES` as written, a list at most `MAX_ITEMS` ids and
`MAX_LIST_BYTES`, evidence at most `MAX_EVIDENCE` characters; a cut value ends with `…[+N chars]` (a list with
`…[+N more]`). A line is then at most `MAX_LINE_BYTES`: one client cannot rotate the others' findings away.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import queue
import re
import socket
import stat
import string
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from urllib.parse import quote, unquote

from .trace_dir import open_own

LOG_NAME = "findings.log"
PREFIX = "qdebug.watch:"
FIELDS = ("host", "check", "outcome", "stage", "request_id", "client_id", "donors", "cobatched", "trace")
LISTS = ("donors", "cobatched")
MAX_EVIDENCE = 600  # characters: a line stays bounded whatever a check says
MAX_FIELD_BYTES = 256  # one field's value as written (percent-encoded)
MAX_ITEMS = 32  # ids in one list field
MAX_LIST_BYTES = 1024  # one list field as written
MAX_LINE_BYTES = 8192  # a whole line (the caps above add up to less: tests/unit/test_watch_files.py holds it)
MARKER_ROOM = 24  # characters a cut marker `…[+N chars]` takes (N below 10**14)
QUEUE_LIMIT = 2000  # lines waiting for the writer; past it lines are dropped (and counted)
QUIET_SECONDS = 60.0  # after a line is lost, the next lost lines are said at most once in this long, with their count

_MORE = re.compile(r"…\[\+([0-9]{1,15}) more\]")  # a list's marker, as cap_list writes it
log = logging.getLogger("vllm.qdebug")


@dataclass
class WatchFinding:
    """One violation (or failed check) of one request, as the log line holds it."""

    check: str
    outcome: str
    stage: str
    request_id: str
    evidence: str
    client_id: str = ""
    donors: list[str] = field(default_factory=list)
    cobatched: list[str] = field(default_factory=list)
    trace: str = ""
    host: str = ""
    time: str = ""  # ISO 8601 UTC, set when written

    def to_json(self) -> dict:
        """The finding as a JSON object (`qdebug watch --json`)."""
        return {k: getattr(self, k) for k in ("time", *FIELDS, "evidence")}


def format_line(f: WatchFinding) -> str:
    """The finding as one log line (no newline), every field capped: at most MAX_LINE_BYTES as UTF-8."""
    f = bound(replace(f))
    level = "ERROR" if f.outcome == "violation" else "WARNING"
    parts = [f"{f.time} {level} {PREFIX}"]
    for key in FIELDS:
        value = getattr(f, key)
        if key in LISTS:
            text = ",".join(_enc(v) for v in value) if value else "-"
        else:
            text = _enc(value) if value else "-"
        parts.append(f"{key}={text}")
    parts.append(f"evidence={' '.join(f.evidence.split())}")  # one line: bound() has cut it
    return " ".join(parts)


def bound(f: WatchFinding) -> WatchFinding:
    """Cap every field of `f` in place (the client's ids first of all), as the log writes them; `f` itself."""
    for key in ("host", "check", "outcome", "stage", "request_id", "client_id", "trace"):
        setattr(f, key, cap_field(str(getattr(f, key) or "")))
    f.donors, f.cobatched = cap_list(f.donors), cap_list(f.cobatched)
    f.evidence = cut_chars(str(f.evidence), MAX_EVIDENCE)
    f.time = cut_chars(str(f.time), 40)  # now_iso's when the log sets it
    return f


def cut_chars(text: str, limit: int) -> str:
    """`text`, or its first `limit` characters and `…[+N chars]` saying how many were cut (a text cut once is not cut
    again: up to MARKER_ROOM characters past `limit` are left, room for the marker)."""
    return text if len(text) <= limit + MARKER_ROOM else f"{text[:limit]}…[+{len(text) - limit} chars]"


def cap_field(value: str, limit: int = MAX_FIELD_BYTES) -> str:
    """`value`, or as much of it as fits `limit` bytes percent-encoded, then `…[+N chars]` (the marker included)."""
    if 3 * len(value) <= limit and value.isascii():  # the common id: nothing to measure
        return value
    head = value[:limit + 1]  # an encoded character takes a byte at least: no more than `limit` of them fit
    if len(value) <= limit and len(_enc(head)) <= limit:
        return value
    budget = limit - len(_enc(f"…[+{len(value)} chars]"))  # the longest marker this value can need
    kept, used = 0, 0
    for ch in head:
        used += 1 if ch in _SAFE_CHARS else 3 * len(ch.encode("utf-8", errors="backslashreplace"))  # at most _enc's
        if used > budget:
            break
        kept += 1
    return f"{value[:kept]}…[+{len(value) - kept} chars]"


def cap_list(values: list) -> list[str]:
    """At most MAX_ITEMS ids, each capped, that fit MAX_LIST_BYTES joined; then `…[+N more]` for the rest (a list
    capped once comes out the same)."""
    items = [str(v) for v in values[:MAX_ITEMS + 1]]
    more = len(values) - len(items)
    if items and (m := _MORE.fullmatch(items[-1])):
        items, more = items[:-1], more + int(m.group(1))
    total = len(items) + more
    out: list[str] = []
    used = 0
    room = MAX_LIST_BYTES - len(_enc(f"…[+{total} more]")) - 1
    for value in items[:MAX_ITEMS]:
        item = cap_field(value)
        size = len(_enc(item)) + (1 if out else 0)
        if used + size > room:
            break
        out.append(item)
        used += size
    if len(out) < total:
        out.append(f"…[+{total - len(out)} more]")
    return out


def parse_line(line: str) -> WatchFinding | None:
    """The finding a log line holds, or None when it is not a watch findings line."""
    head, sep, rest = line.rstrip("\r\n").partition(f" {PREFIX} ")
    if not sep or " " not in head:
        return None
    time = head.split(" ", 1)[0]
    fields, sep, evidence = rest.partition(" evidence=")
    if not sep and rest.startswith("evidence="):
        fields, evidence = "", rest[len("evidence="):]
    values: dict = {}
    for token in fields.split(" "):
        key, eq, value = token.partition("=")
        if not eq or key not in FIELDS:
            return None
        if key in LISTS:
            values[key] = [] if value == "-" else [unquote(v) for v in value.split(",")]
        else:
            values[key] = "" if value == "-" else unquote(value)
    if not values.get("check") or not values.get("outcome"):
        return None
    return WatchFinding(check=values["check"], outcome=values["outcome"], stage=values.get("stage", ""),
                        request_id=values.get("request_id", ""), evidence=evidence, client_id=values.get("client_id", ""),
                        donors=values.get("donors", []), cobatched=values.get("cobatched", []), trace=values.get("trace", ""),
                        host=values.get("host", ""), time=time)


def read_findings(folder: str, limit: int = 100_000) -> list[WatchFinding]:
    """The findings of a watch folder's log (the rotated file first), oldest first; at most the last `limit`."""
    out: list[WatchFinding] = []
    for name in (LOG_NAME + ".1", LOG_NAME):
        path = os.path.join(folder, name)
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    finding = parse_line(line)
                    if finding is not None:
                        out.append(finding)
        except FileNotFoundError:
            continue
    return out[-limit:]


_SAFE = "-._~:/@+[]()!*'"  # written as they are (with letters and digits); every other character percent-encoded
_SAFE_CHARS = frozenset(string.ascii_letters + string.digits + _SAFE)


def _enc(value) -> str:
    return quote(str(value), safe=_SAFE, errors="backslashreplace")  # a lone surrogate is written escaped


def now_iso() -> str:
    """The time now, ISO 8601 UTC with microseconds and Z."""
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class FindingsLog:
    """Appends findings on a background thread (never in the engine's step); rotates at `limit` bytes.

    Every line lost (the queue full, or a write that failed: a full disk, a `findings.log` that is a link) is counted
    in `dropped` and reported to `on_dropped` (the worker's counters); a failed write is said in vLLM's log once,
    then at most once a minute with how many more were lost."""

    def __init__(self, folder: str, limit: int, on_dropped: Callable[[int], None] | None = None) -> None:
        self.path = os.path.join(folder, LOG_NAME)
        self.limit = max(limit, 4096)
        self.host = socket.gethostname()
        self.dropped = 0
        self.on_dropped = on_dropped
        self.lost_since_said = 0  # write failures not yet said in the log
        self.said_at: float | None = None  # when a write failure was last said
        self.lock = threading.Lock()
        self.queue: queue.Queue = queue.Queue(QUEUE_LIMIT)
        self.thread = threading.Thread(target=self._run, name="qdebug-watch-log", daemon=True)
        self.thread.start()

    def add(self, finding: WatchFinding) -> bool:
        """Queue a finding (host and time filled in, every field capped in place); False when the queue is full and
        it was dropped."""
        finding.host, finding.time = finding.host or self.host, finding.time or now_iso()
        bound(finding)
        try:
            self.queue.put_nowait(finding)
            return True
        except queue.Full:
            self._count_lost()
            return False

    def drain(self, timeout: float = 10.0) -> None:
        """Write what is queued (at shutdown, and in tests)."""
        done = threading.Event()
        try:
            self.queue.put(done, timeout=timeout)
        except queue.Full:
            return
        done.wait(timeout)

    def _count_lost(self) -> None:
        with self.lock:
            self.dropped += 1
            dropped = self.dropped
        if self.on_dropped is not None:
            self.on_dropped(dropped)

    def _run(self) -> None:
        while True:
            item = self.queue.get()
            if isinstance(item, threading.Event):
                item.set()
                continue
            try:
                self._append(format_line(item) + "\n")
            except Exception as exc:  # a full disk costs the line, never the engine
                self._count_lost()
                self._say_lost(exc)

    def _say_lost(self, exc: Exception) -> None:
        """The first lost line is said; later ones at most once per QUIET_SECONDS, with their count."""
        self.lost_since_said += 1
        now = time.monotonic()
        if self.said_at is None:
            log.warning("qdebug: watch findings log %s not written (%s: %s); the line is counted in "
                        "qdebug_watch_findings_dropped_total", self.path, type(exc).__name__, exc)
        elif now - self.said_at >= QUIET_SECONDS:
            log.warning("qdebug: watch findings log %s: %d more lines not written (latest: %s: %s)", self.path,
                        self.lost_since_said, type(exc).__name__, exc)
        else:
            return
        self.said_at, self.lost_since_said = now, 0

    def _append(self, line: str) -> None:
        data = line.encode("utf-8", errors="backslashreplace")
        try:
            st = os.lstat(self.path)  # the log itself, never what a link points to
        except FileNotFoundError:
            st = None
        if st is not None and stat.S_ISREG(st.st_mode) and st.st_size and st.st_size + len(data) > self.limit:
            os.replace(self.path, self.path + ".1")
        # never through a link, a FIFO or a second name of a file elsewhere: the folder's own regular file only
        fd = open_own(os.path.dirname(self.path), LOG_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
