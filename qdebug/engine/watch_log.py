"""The watch's findings log: one line per violation (or failed check), appended to `DIR/findings.log`, rotated to
`findings.log.1` when it passes its bound (so the folder holds at most twice the bound).

The line format (documented in docs/watch.md; `parse_line` reads it back):

    2026-12-04T18:50:01.123456Z ERROR qdebug.watch: host=H check=placement outcome=violation stage=sync
        request_id=R client_id=C donors=A,B cobatched=X,Y trace=NAME evidence=free text to the end of the line

(one line). Every field but `evidence` is `key=value` with the value percent-encoded (space, `,`, `=`, `%` and
non-printing characters); list fields join encoded items with `,`; `-` is an empty value. The level is ERROR for a
violation and WARNING for a check that raised (`outcome=error`).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import queue
import socket
import threading
from dataclasses import dataclass, field
from urllib.parse import quote, unquote

LOG_NAME = "findings.log"
PREFIX = "qdebug.watch:"
FIELDS = ("host", "check", "outcome", "stage", "request_id", "client_id", "donors", "cobatched", "trace")
LISTS = ("donors", "cobatched")
MAX_EVIDENCE = 600  # characters: a line stays bounded whatever a check says
MAX_ITEMS = 32  # ids in one list field
QUEUE_LIMIT = 2000  # lines waiting for the writer; past it lines are dropped (and counted)

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
    """The finding as one log line (no newline)."""
    level = "ERROR" if f.outcome == "violation" else "WARNING"
    parts = [f"{f.time} {level} {PREFIX}"]
    for key in FIELDS:
        value = getattr(f, key)
        if key in LISTS:
            text = ",".join(_enc(v) for v in value[:MAX_ITEMS]) if value else "-"
        else:
            text = _enc(value) if value else "-"
        parts.append(f"{key}={text}")
    evidence = " ".join(str(f.evidence).split())[:MAX_EVIDENCE]
    parts.append(f"evidence={evidence}")
    return " ".join(parts)


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


def _enc(value) -> str:
    return quote(str(value), safe="-._~:/@+[]()!*'")


def now_iso() -> str:
    """The time now, ISO 8601 UTC with microseconds and Z."""
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class FindingsLog:
    """Appends findings on a background thread (never in the engine's step); rotates at `limit` bytes."""

    def __init__(self, folder: str, limit: int) -> None:
        self.path = os.path.join(folder, LOG_NAME)
        self.limit = max(limit, 4096)
        self.host = socket.gethostname()
        self.dropped = 0
        self.queue: queue.Queue = queue.Queue(QUEUE_LIMIT)
        self.thread = threading.Thread(target=self._run, name="qdebug-watch-log", daemon=True)
        self.thread.start()

    def add(self, finding: WatchFinding) -> bool:
        """Queue a finding (host and time filled in); False when the queue is full and it was dropped."""
        finding.host, finding.time = finding.host or self.host, finding.time or now_iso()
        try:
            self.queue.put_nowait(finding)
            return True
        except queue.Full:
            self.dropped += 1
            return False

    def drain(self, timeout: float = 10.0) -> None:
        """Write what is queued (at shutdown, and in tests)."""
        done = threading.Event()
        try:
            self.queue.put(done, timeout=timeout)
        except queue.Full:
            return
        done.wait(timeout)

    def _run(self) -> None:
        while True:
            item = self.queue.get()
            if isinstance(item, threading.Event):
                item.set()
                continue
            try:
                self._append(format_line(item) + "\n")
            except Exception as exc:  # a full disk costs the line, never the engine
                self.dropped += 1
                log.warning("qdebug: watch findings log %s not written (%s: %s)", self.path, type(exc).__name__, exc)

    def _append(self, line: str) -> None:
        data = line.encode("utf-8")
        try:
            size = os.path.getsize(self.path)
        except FileNotFoundError:
            size = 0
        if size and size + len(data) > self.limit:
            os.replace(self.path, self.path + ".1")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
