"""The watch's flight recorder: a bounded ring of the last steps' batch composition (which requests, how many tokens
each), and, on a violation, engine traces (.qdt) of the offending request and the requests that shared its step.

The traces are the plugin's own (vllm_tracer.EngineTracer, into QDEBUG_VLLM_TRACE_DIR, by default
QDEBUG_VLLM_WATCH_DIR/traces): the watch's check runs where vLLM merges the step's visual rows, before the decoder's
first layer, so a request whose prompt starts in this step is recorded from its first row. A request that started in
an earlier step (a later prefill chunk, a decode) cannot be recorded whole and is left out. Bounded: one recording per
`MIN_GAP` seconds, at most `MAX_REQUESTS` requests each, none while the trace folder holds `QDEBUG_VLLM_WATCH_TRACE_MB`
(default 512) MiB of traces; the ring's snapshot beside the findings log (`flight-*.json`, the newest `MAX_SNAPSHOTS`).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections import deque

from .trace_dir import safe_stem

RING_STEPS = 256
MIN_GAP = 5.0  # seconds between two recordings
MAX_REQUESTS = 8  # requests one recording traces (the offending one first)
MAX_SNAPSHOTS = 64
ENV_TRACE_MB = "QDEBUG_VLLM_WATCH_TRACE_MB"
DEFAULT_TRACE_MB = 512

log = logging.getLogger("vllm.qdebug")


class FlightRecorder:
    """The ring of steps and the rate- and disk-limited trace recordings of one worker."""

    def __init__(self, runner, folder: str) -> None:
        self.runner, self.folder = runner, folder
        self.ring: deque = deque(maxlen=RING_STEPS)
        self.steps = 0
        self.last = 0.0
        self.chosen: set[str] = set()  # the requests the latest recording traces
        self.open = False  # the step's decoder has not run yet (set by the watcher around the merge)
        self.limit = _trace_mb() << 20

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
        if not self.open or now - self.last < MIN_GAP:  # once the decoder runs, a prompt can no longer be traced whole
            return ""
        if _size(root) >= self.limit:
            log.warning("qdebug: watch: %s holds %d MiB of traces or more; no flight-recorder trace for %s", root, self.limit >> 20, rid)
            return ""
        chosen = [r for r in (rid, *cobatched) if self._starts_now(r) and r not in tracer.traced and r not in tracer.pending]
        if rid not in chosen:
            return ""
        self.last, self.chosen = now, set(chosen[:MAX_REQUESTS])
        tracer.pending.update(self.chosen)
        tracer._hooks(True)  # this step's decoder has not run yet: its layer hooks admit them from their first row
        self._snapshot(rid, chosen[:MAX_REQUESTS])
        return self._path(root, rid)

    def _path(self, root: str, rid: str) -> str:
        """Where the tracer writes `rid`'s trace: relative to the watch folder when inside it."""
        path = os.path.join(root, f"{safe_stem(rid)}.qdt")
        inside = os.path.relpath(path, self.folder)
        return path if inside.startswith("..") else inside

    def _starts_now(self, rid: str) -> bool:
        state = self.runner.requests.get(rid)
        return state is not None and int(state.num_computed_tokens) == 0

    def _snapshot(self, rid: str, traced: list[str]) -> None:
        """The ring as it stands, beside the findings log (the oldest snapshots removed past MAX_SNAPSHOTS)."""
        name = f"flight-{time.strftime('%Y%m%dT%H%M%S')}-{self.steps}-{safe_stem(rid)[:80]}.json"
        doc = {"request_id": rid, "traced": traced, "steps": [{"step": step, "time": at, "requests": {str(k): int(v) for k, v in tokens.items()}}
                                                            for step, at, tokens in self.ring]}
        try:
            with open(os.path.join(self.folder, name), "w", encoding="utf-8") as fh:
                json.dump(doc, fh)
            snaps = sorted(f for f in os.listdir(self.folder) if f.startswith("flight-") and f.endswith(".json"))
            for old in snaps[:-MAX_SNAPSHOTS]:
                os.unlink(os.path.join(self.folder, old))
        except OSError as exc:
            log.warning("qdebug: watch: flight-recorder snapshot not written (%s)", exc)


def _size(folder: str) -> int:
    try:
        return sum(e.stat().st_size for e in os.scandir(folder) if e.name.endswith(".qdt") and e.is_file())
    except OSError:
        return 0


def _trace_mb() -> int:
    raw = os.environ.get(ENV_TRACE_MB, "").strip()
    if raw.isascii() and raw.isdigit() and int(raw) > 0:
        return int(raw)
    if raw:
        log.error("qdebug: %s=%r: expected a whole number of MiB of at least 1; using %d", ENV_TRACE_MB, raw[:40], DEFAULT_TRACE_MB)
    return DEFAULT_TRACE_MB
