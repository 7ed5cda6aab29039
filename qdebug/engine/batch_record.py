"""BatchRecorder: what vLLM's model runner batched together, as it ran, for every request (tagged or not).

Where it listens (vLLM 0.32's V1 runner; shared/DESIGN.md "Seams in vLLM"):
- each step's `SchedulerOutput` (the tracer's step hooks call `step_begins`, `step_ends`): the requests scheduled
  (`num_scheduled_tokens`), which of them compute prompt rows (`num_computed_tokens` below the prompt's length);
- `runner._execute_mm_encoder` (wrapped): the items the step encodes, in the order vLLM batches them (by
  `scheduled_encoder_inputs`, stable-sorted by modality, as `_batch_mm_inputs_from_scheduler` does);
- `model.embed_multimodal` (wrapped): one call of the encoder; it takes as many of those items as it returns
  outputs for.

What it keeps is small: a name and a prompt length per request in flight, and one line per step and per encoder call
(names and item indexes), written to `batches.jsonl` (batch_log.py reads it) with one write at the end of a step in
which a request finished (its last lines, and its `cache_reads` line, are then on disk: a replay reading the log after
its answers finds them), or once `FLUSH_BYTES` or `FLUSH_S` have gathered, and at shutdown; a write per step cost
~17 µs of the ~60 µs the plugin spends on a step with nothing tagged.
A step's line is put together from each request's name, JSON-encoded once when the request is first scheduled: a
step costs a join of its requests' names and one write (~6 µs for 8 requests, against ~15 µs with `json.dumps`).
The log is bounded: past `MAX_BYTES` it becomes `batches.1.jsonl` and a new one starts.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import time

from .batch_log import BATCH_LOG, BATCH_LOG_OLD, BATCH_STEP, CACHE_READS, ENCODER_CALL
from .plugin_clock import clock_of
from .request_names import client_name

log = logging.getLogger("vllm.qdebug")
MAX_BYTES = 16 << 20  # per generation of the log: two generations at most on disk
FLUSH_BYTES = 64 << 10  # lines held before a write, at most (between finishing requests)
FLUSH_S = 0.5  # seconds lines are held, at most
_ENCODE = json.JSONEncoder(separators=(",", ":")).encode  # one encoder: json.dumps with options builds one per call


class BatchLogFile:
    """Appends whole lines to a folder's own `batches.jsonl` (never a link), rotating it at `max_bytes`."""

    def __init__(self, root: str | os.PathLike, max_bytes: int = MAX_BYTES) -> None:
        self.root, self.max_bytes = os.fspath(root), max_bytes
        self.fd = self._open()

    def _open(self) -> int:
        from .trace_dir import open_own

        fd = open_own(self.root, BATCH_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        self.size = os.fstat(fd).st_size
        return fd

    def append(self, data: bytes) -> None:
        """One write of whole lines; past the bound the file is renamed to the older generation first."""
        if self.size + len(data) > self.max_bytes and self.size:
            os.close(self.fd)
            path = os.path.join(self.root, BATCH_LOG)
            if stat.S_ISREG(os.lstat(path).st_mode):
                os.replace(path, os.path.join(self.root, BATCH_LOG_OLD))
            self.fd = self._open()
        self.size += os.write(self.fd, data)


class BatchRecorder:
    """Records each step's requests and each encoder call's (request, item) pairs on one model runner."""

    def __init__(self, runner, out: BatchLogFile, witness=None) -> None:
        self.runner, self.out = runner, out
        self.witness = witness  # a CacheWitness: each finished request's cache reads get a line
        self.clock = clock_of(runner)  # its encoder wrappers run inside vLLM's step: their time is the plugin's
        self.worker = os.getpid()
        self.known: dict[str, tuple[str, int | None]] = {}  # request in flight → (its name, its prompt's length)
        self.encoded: dict[str, str] = {}  # request in flight → its name as a JSON string (a step line's part)
        self.calls: dict[str, list[dict]] = {}  # request in flight → the encoder calls that carried its items
        self.step = self.call = 0
        self.items: list[tuple[str, str, int]] | None = None  # (modality, request, item) the running step encodes
        self.lines: list[bytes] = []
        self.held = 0  # bytes of lines not yet written
        self.flush = False  # this step finished a request: its lines are written at the step's end
        self.written = time.monotonic()
        self.broken = False

    def install(self) -> None:
        """Wrap the runner's encoder step and the model's encoder call (after any fault: it sees their outputs)."""
        runner, model = self.runner, self.runner.model
        encode_step, embed = runner._execute_mm_encoder, model.embed_multimodal
        runner._execute_mm_encoder = lambda scheduler_output, *a, **kw: self._encoder_step(encode_step, scheduler_output, *a, **kw)
        model.embed_multimodal = lambda *a, **kw: self._embedded(embed(*a, **kw))

    # the step --------------------------------------------------------------------------------------------
    def step_begins(self, out) -> None:
        """Note the step's new requests and write which requests it runs, prefill and decode (called before it runs)."""
        if self.broken:
            return
        self._guard(self._step_begins, out)

    def _step_begins(self, out) -> None:
        finished = getattr(out, "finished_req_ids", ()) or ()
        self.flush = self.flush or bool(finished)
        for rid in finished:
            reads = self.witness.read_docs(rid) if self.witness is not None else []
            if reads:  # the documents as the engine core sent them: read_batch_log parses (and checks) each
                name = self.known.get(rid, (rid, None))[0]
                self._line({"record": CACHE_READS, "worker": self.worker, "request": name, "reads": reads})
            self.known.pop(rid, None)
            self.calls.pop(rid, None)
            self.encoded.pop(rid, None)
        for new in getattr(out, "scheduled_new_reqs", ()) or ():
            params = getattr(new, "sampling_params", None)
            name, _ = client_name(getattr(params, "extra_args", None), new.req_id)
            ids = new.prompt_token_ids
            embeds = getattr(new, "prompt_embeds", None)
            length = len(ids) if ids is not None else (int(embeds.shape[0]) if embeds is not None else None)
            self.known[new.req_id] = (name, length)
            self.encoded[new.req_id] = _ENCODE(name)
        tokens = getattr(out, "num_scheduled_tokens", None) or {}
        if not tokens:
            return
        computed = {new.req_id: new.num_computed_tokens for new in out.scheduled_new_reqs}
        cached = out.scheduled_cached_reqs
        computed.update(zip(cached.req_ids, cached.num_computed_tokens))
        self.step += 1
        prefill: list[str] = []
        decode: list[str] = []
        known, encoded = self.known, self.encoded
        for rid, n in tokens.items():
            length = known[rid][1] if rid in known else None
            done = computed.get(rid)
            runs_prompt = done < length if length is not None and done is not None else n > 1
            (prefill if runs_prompt else decode).append(encoded.get(rid) or _ENCODE(rid))
        # the line json.dumps would write for {"record", "worker", "step", "prefill": [names], "decode": [names]}
        self._held(f'{{"record":{_ENCODE(BATCH_STEP)},"worker":{self.worker},"step":{self.step},'
                   f'"prefill":[{",".join(prefill)}],"decode":[{",".join(decode)}]}}\n'.encode("utf-8"))

    def step_ends(self) -> None:
        """Write the lines held (one write) when this step finished a request, or enough of them or for long enough."""
        if self.lines and not self.broken and (self.flush or self.held >= FLUSH_BYTES or time.monotonic() - self.written >= FLUSH_S):
            self.write()
        self.items = None

    def write_at_step_end(self) -> None:
        """Have this step's end write every line held (a watch finding cites the step's lines and encoder calls)."""
        self.flush = True

    def write(self) -> None:
        """Write every line held now (the step's end, or shutdown)."""
        self.flush = False
        if self.lines and not self.broken:
            data, self.lines, self.held, self.written = b"".join(self.lines), [], 0, time.monotonic()
            self._guard(self.out.append, data)

    def calls_for(self, req_id: str) -> list[dict]:
        """The encoder calls that carried request `req_id`'s items (for its trace)."""
        return self.calls.get(req_id, [])

    # the encoder -----------------------------------------------------------------------------------------
    def _encoder_step(self, encode_step, scheduler_output, *args, **kwargs):
        if not self.broken:
            with self.clock:
                self._guard(self._scheduled_items, scheduler_output)
        try:
            return encode_step(scheduler_output, *args, **kwargs)
        finally:
            self.items = None

    def _scheduled_items(self, scheduler_output) -> None:
        """The items this step encodes, in the order vLLM hands them to the encoder (cached ones are not encoded)."""
        items = []
        for rid, indexes in (scheduler_output.scheduled_encoder_inputs or {}).items():
            features = self.runner.requests[rid].mm_features
            for i in indexes:
                feature = features[i]
                if feature.data is not None and feature.modality != "prompt_embeds":  # prompt_embeds: no encoder runs
                    items.append((str(feature.modality), rid, int(i)))
        items.sort(key=lambda item: item[0])  # stable, as vLLM groups them by modality
        self.items = items

    def _embedded(self, outputs):
        if self.items and not self.broken:
            with self.clock:
                self._guard(self._record_call, len(outputs))
        return outputs

    def _record_call(self, count: int) -> None:
        items = self.items or []  # set by the step that encodes (the caller checks)
        taken, self.items = items[:count], items[count:]
        self.call += 1
        names = {rid: self.known.get(rid, (rid, None))[0] for _, rid, _ in taken}
        record = {"worker": self.worker, "call": self.call, "step": self.step, "modality": taken[0][0],
                  "items": [[names[rid], i] for _, rid, i in taken]}
        for rid in names:
            self.calls.setdefault(rid, []).append(record)
        self._line({"record": ENCODER_CALL, **record})

    def _line(self, doc: dict) -> None:
        self._held((_ENCODE(doc) + "\n").encode("utf-8"))

    def _held(self, line: bytes) -> None:
        self.lines.append(line)
        self.held += len(line)

    def _guard(self, fn, *args) -> None:
        """An error stops the batch log (said once); the engine serves on as without it."""
        try:
            fn(*args)
        except Exception as exc:  # the plugin never fails a request
            self.broken, self.lines, self.items = True, [], None
            log.error("qdebug: batch log stopped (%s: %s); %s is incomplete from here", type(exc).__name__, exc, BATCH_LOG)
