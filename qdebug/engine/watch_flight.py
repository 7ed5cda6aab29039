"""The watch's flight recorder: a bounded ring of the last steps' batch composition (which requests, how many tokens
each), and, on a violation, engine traces (.qdt) of the offending request and the requests that shared its step.

The traces are the plugin's own (vllm_tracer.EngineTracer, into QDEBUG_VLLM_TRACE_DIR, by default
QDEBUG_VLLM_WATCH_DIR/traces): the watch's check runs where vLLM merges the step's visual rows, before the decoder's
first layer, so a request whose prompt starts in this step is recorded from its first row. A request that started in
an earlier step (a later prefill chunk, a decode) cannot be recorded whole and is left out. Bounded: one recording per
`MIN_GAP` seconds, at most `MAX_REQUESTS` requests each, and no recorded trace is written that would take the trace
folder's traces and index past `QDEBUG_VLLM_WATCH_TRACE_MB` (default 512) MiB (TraceDir.write checks each one).

The ring's snapshot goes beside the findings log (`flight-*.json`), written by a thread of its own, never in the step:
request ids (the client's) cut to `MAX_ID_CHARS`, a snapshot at most `MAX_SNAPSHOT_BYTES` (the oldest steps left out
past it, and counted), and the folder's snapshots at most `MAX_SNAPSHOTS` files and `MAX_FLIGHT_BYTES` in all (the
oldest of the plugin's own removed; a file of another name, a link or a second name of a file is never touched).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import re
import stat
import threading
import time
from collections import deque

from .trace_dir import safe_stem, trace_bytes
from .watch_log import cut_chars

RING_STEPS = 256
MIN_GAP = 5.0  # seconds between two recordings
MAX_REQUESTS = 8  # requests one recording traces (the offending one first)
MAX_ID_CHARS = 128  # a request id in a snapshot (the client's: OpenAI `request_id`, `X-Request-Id`)
MAX_SNAPSHOT_BYTES = 512 << 10
MAX_SNAPSHOTS = 64
MAX_FLIGHT_BYTES = 16 << 20  # every flight-*.json of the folder together
ENV_TRACE_MB = "QDEBUG_VLLM_WATCH_TRACE_MB"
DEFAULT_TRACE_MB = 512
SNAPSHOT_NAME = re.compile(r"flight-[0-9]{8}T[0-9]{6}-[0-9]+-[A-Za-z0-9._-]{1,80}\.json")  # what _name writes, only

log = logging.getLogger("vllm.qdebug")


class FlightRecorder:
    """The ring of steps and the rate- and disk-limited trace recordings of one worker."""

    def __init__(self, runner, folder: str) -> None:
        self.runner, self.folder = runner, folder
        self.ring: deque = deque(maxlen=RING_STEPS)
        self.steps = 0
        self.last = 0.0
        self.chosen: set[str] = set()  # the requests the latest recording traces
        self.open = False  # the step's decoder has not run yet (set by the watcher around the checks before it)
        self.starting: set[str] = set()  # requests whose first step this is (set by the cache check, which runs
        # before the runner holds their state)
        self.armed = False  # a violation found after the decoder started: the next step's new requests are recorded
        self.limit = _trace_mb() << 20
        self.pending: queue.Queue = queue.Queue(2)  # snapshots waiting for the writer (one every MIN_GAP at most)
        self.writer: threading.Thread | None = None

    def note_step(self, scheduler_output) -> None:
        """Keep one step's composition: request → tokens scheduled (the ring forgets the oldest)."""
        self.steps += 1
        tokens = getattr(scheduler_output, "num_scheduled_tokens", None) or {}
        self.ring.append((self.steps, time.time(), dict(tokens)))  # a copy (C speed); made JSON-ready only in a snapshot

    def record(self, rid: str, cobatched: list[str]) -> str:
        """Start tracing `rid` and the co-batched requests whose prompts start in this step; the offending request's
        trace path (relative to the watch folder when inside it), or "" when nothing is recorded for it."""
        tracer = getattr(self.runner, "_qdebug_tracer", None)
        if tracer is None:
            return ""
        root = str(tracer.writer.trace_dir.root)
        if rid in self.chosen and (rid in tracer.pending or rid in tracer.traced):  # traced by this step's recording
            return self._path(root, rid)
        now = time.monotonic()
        if not self.open:  # once the decoder runs, a prompt can no longer be traced whole: record the next ones instead
            self.armed = self.armed or now - self.last >= MIN_GAP
            return ""
        if now - self.last < MIN_GAP:
            return ""
        if trace_bytes(root) >= self.limit:
            log.warning("qdebug: watch: %s holds %d MiB of traces or more; no flight-recorder trace for %s", root,
                        self.limit >> 20, cut_chars(rid, MAX_ID_CHARS))
            return ""
        chosen = [r for r in (rid, *cobatched) if self._starts_now(r) and r not in tracer.traced and r not in tracer.pending]
        if rid not in chosen:
            return ""
        self.last, self.chosen = now, set(chosen[:MAX_REQUESTS])
        tracer.pending.update(self.chosen)
        tracer.bounded.update(dict.fromkeys(self.chosen, self.limit))  # each written only while the folder has room
        tracer._hooks(True)  # this step's decoder has not run yet: its layer hooks admit them from their first row
        self.snapshot(rid, chosen[:MAX_REQUESTS])
        return self._path(root, rid)

    def start_armed(self, scheduler_output) -> bool:
        """Armed by a violation no trace could catch (a check after the step's decoder: layout, logits), record the
        requests whose prompts start in this step, before its decoder runs; True when a recording started (the watcher
        then samples the step, and a violation of a step they are in names their trace)."""
        tracer = getattr(self.runner, "_qdebug_tracer", None)
        if tracer is None or time.monotonic() - self.last < MIN_GAP:
            return False
        root = str(tracer.writer.trace_dir.root)
        if trace_bytes(root) >= self.limit:
            return False
        new = [str(n.req_id) for n in getattr(scheduler_output, "scheduled_new_reqs", ()) or ()
               if not int(getattr(n, "num_computed_tokens", 0) or 0)]  # a prompt that starts here, not from the prefix cache
        chosen = [r for r in new if r not in tracer.traced and r not in tracer.pending][:MAX_REQUESTS]
        if not chosen:
            return False
        self.armed, self.last, self.chosen = False, time.monotonic(), set(chosen)
        tracer.pending.update(self.chosen)
        tracer.bounded.update(dict.fromkeys(self.chosen, self.limit))
        tracer._hooks(True)
        self.snapshot(chosen[0], chosen)
        return True

    def _path(self, root: str, rid: str) -> str:
        """Where the tracer writes `rid`'s trace (named by the client's qdebug_id when it gave one, as the plugin's
        cache witness knows it): relative to the watch folder when inside it."""
        witness = getattr(self.runner, "_qdebug_witness", None)
        name = (witness.name(rid) if witness is not None else "") or rid
        path = os.path.join(root, f"{safe_stem(name)}.qdt")
        inside = os.path.relpath(path, self.folder)
        return path if inside.startswith("..") else inside

    def _starts_now(self, rid: str) -> bool:
        if rid in self.starting:
            return True
        state = self.runner.requests.get(rid)
        return state is not None and int(state.num_computed_tokens) == 0

    def snapshot(self, rid: str, traced: list[str]) -> None:
        """Hand the ring as it stands to the snapshot writer (in the step: a copy of 256 references, nothing more)."""
        item = (self._name(rid), rid, list(traced), list(self.ring))
        if self.writer is None:
            self.writer = threading.Thread(target=self._run, name="qdebug-watch-flight", daemon=True)
            self.writer.start()
        try:
            self.pending.put_nowait(item)
        except queue.Full:
            log.warning("qdebug: watch: flight-recorder snapshot for %s not written (the writer is behind)", cut_chars(rid, MAX_ID_CHARS))

    def drain(self, timeout: float = 30.0) -> None:
        """Wait until every snapshot handed over is written (at shutdown, and in tests)."""
        if self.writer is None:
            return
        done = threading.Event()
        try:
            self.pending.put(done, timeout=timeout)
        except queue.Full:
            return
        done.wait(timeout)

    def _name(self, rid: str) -> str:
        return f"flight-{time.strftime('%Y%m%dT%H%M%S')}-{self.steps}-{safe_stem(rid)[:80]}.json"

    def _run(self) -> None:
        while True:
            item = self.pending.get()
            if isinstance(item, threading.Event):
                item.set()
                continue
            try:
                write_snapshot(self.folder, *item)
                prune_snapshots(self.folder)
            except Exception as exc:  # a full disk costs the snapshot, never the engine
                log.warning("qdebug: watch: flight-recorder snapshot not written (%s: %s)", type(exc).__name__, exc)


def snapshot_bytes(rid: str, traced: list[str], ring: list) -> bytes:
    """The snapshot's JSON: ids cut to MAX_ID_CHARS, the newest steps that fit MAX_SNAPSHOT_BYTES (`steps_left_out`
    counts the older ones that did not)."""
    steps: list[bytes] = []
    used = 0
    head = {"request_id": cut_chars(rid, MAX_ID_CHARS), "traced": [cut_chars(r, MAX_ID_CHARS) for r in traced[:MAX_REQUESTS]]}
    room = MAX_SNAPSHOT_BYTES - len(json.dumps({**head, "steps_left_out": len(ring), "steps": []}).encode())
    for step, at, tokens in reversed(ring):
        entry = json.dumps({"step": step, "time": at, "requests": {cut_chars(str(k), MAX_ID_CHARS): int(v) for k, v in tokens.items()}}).encode()
        if used + len(entry) + 2 > room:
            break
        steps.append(entry)
        used += len(entry) + 2
    body = json.dumps({**head, "steps_left_out": len(ring) - len(steps), "steps": []}).encode()
    return body[:-2] + b", ".join(reversed(steps)) + b"]}"


def write_snapshot(folder: str, name: str, rid: str, traced: list[str], ring: list) -> None:
    """Write a snapshot as a new file (never through a link, never over a file already there)."""
    data = snapshot_bytes(rid, traced, ring)
    fd = os.open(os.path.join(folder, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def prune_snapshots(folder: str) -> None:
    """Remove the oldest of the folder's snapshots (regular files of one name, named as the recorder names them) past
    MAX_SNAPSHOTS files or MAX_FLIGHT_BYTES in all."""
    snaps = []
    with os.scandir(folder) as entries:
        for entry in entries:
            if not SNAPSHOT_NAME.fullmatch(entry.name):
                continue
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
                snaps.append((st.st_mtime_ns, entry.name, st.st_size))
    snaps.sort(reverse=True)  # newest first
    kept, total = 0, 0
    for _, name, size in snaps:
        if kept < MAX_SNAPSHOTS and total + size <= MAX_FLIGHT_BYTES:
            kept, total = kept + 1, total + size
            continue
        try:
            os.unlink(os.path.join(folder, name))
        except FileNotFoundError:  # another worker of the folder pruned it first
            pass


def _trace_mb() -> int:
    raw = os.environ.get(ENV_TRACE_MB, "").strip()
    if raw.isascii() and raw.isdigit() and int(raw) > 0:
        return int(raw)
    if raw:
        log.error("qdebug: %s=%r: expected a whole number of MiB of at least 1; using %d", ENV_TRACE_MB, raw[:40], DEFAULT_TRACE_MB)
    return DEFAULT_TRACE_MB
