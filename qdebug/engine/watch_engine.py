"""The watch inside vLLM's worker: the cheap checks on every step that merges visual rows, counted and logged.

Where it listens: `model.embed_input_ids` (wrapped; vLLM's runner calls it eagerly, outside any compiled graph, with
the step's requests laid out as `input_batch.req_ids` / `query_start_loc`), and each step (`runner.execute_model`,
through the runner's StepHooks: the requests that finished). A step without visual rows costs one `len()`. Nothing the
watch does changes a tensor vLLM uses; any exception inside it is counted (`qdebug_watch_errors_total{check}`), logged,
and swallowed.
"""

from __future__ import annotations

import logging
import os
import random
import tempfile
import time
import uuid

from qdebug.shown import shown
from qdebug.vocab import WatchOutcome

from .plugin_clock import clock_of
from .request_names import client_name
from .step_hooks import WATCH, hooks_of
from .watch_flight import FlightRecorder
from .watch_checks import items_of, project, projection, step_positions
from .watch_log import FindingsLog, WatchFinding
from .watch_metrics import WatchCounters, serve_counters
from .watch_registry import ItemAt, Point, WatchEntry, entries, stage_of
from .watch_settings import ENV_DIR, ENV_RAISE, ENV_RUN, WatchSettings, read_settings

log = logging.getLogger("vllm.qdebug")
TRACE_DIR = "QDEBUG_VLLM_TRACE_DIR"
LOUD = 10  # the first violations of each check go to vLLM's log too; then one in every QUIET
QUIET = 1000


def prepare_process() -> None:
    """In every vLLM process (the front end first, before it starts the engine): fix the run and the folder the workers
    report into (children inherit the environment), and serve the workers' counters on this process's /metrics."""
    if not os.environ.get(ENV_RUN):
        os.environ[ENV_RUN] = uuid.uuid4().hex[:12]
    if not os.environ.get(ENV_DIR):
        os.environ[ENV_DIR] = tempfile.mkdtemp(prefix="qdebug-watch-")
        log.warning("qdebug: watch: %s not set; findings and counters go to %s", ENV_DIR, os.environ[ENV_DIR])
    if not os.environ.get(TRACE_DIR):  # the flight recorder's traces: the plugin's tracer, tagged requests only otherwise
        os.environ[TRACE_DIR] = os.path.join(os.environ[ENV_DIR], "traces")
    serve_counters(os.environ[ENV_DIR], os.environ[ENV_RUN])


def tensor_parallel_rank(runner) -> int:
    """This worker's tensor-parallel rank: vLLM's own, else the runner's global rank modulo the tensor-parallel size
    (vLLM lays ranks out tensor-parallel first); 0 without tensor parallelism."""
    try:
        from vllm.distributed import get_tensor_model_parallel_rank

        return int(get_tensor_model_parallel_rank())
    except Exception:  # no vLLM here, or its groups not set up: ask the runner's config
        pass
    config = getattr(getattr(runner, "vllm_config", None), "parallel_config", None)
    size = int(getattr(config, "tensor_parallel_size", 1) or 1)
    return int(getattr(config, "rank", 0) or 0) % size if size > 1 else 0


def attach_watch(runner) -> "Watcher | None":
    """Start watching a loaded runner (rank 0 of tensor parallelism: every rank holds the same merged rows)."""
    if getattr(runner, "_qdebug_watch", None) is not None:
        return runner._qdebug_watch
    if tensor_parallel_rank(runner) != 0:
        return None  # rank 0 checks; a request is checked once, not once per rank
    settings = read_settings()
    _usable_folder(settings.folder)
    watcher = Watcher(runner, settings)
    watcher.install()
    watcher.counters.start()  # only now: a watch that failed to attach writes no counters (/metrics: qdebug_watch_up 0)
    runner._qdebug_watch = watcher
    log.info("qdebug: watching every request (checks %s; sampled %s of steps) into %s", ", ".join(e.check for e in entries() if not e.sampled),
             settings.sample, settings.folder)
    return watcher


def _usable_folder(folder: str) -> None:
    """Make the watch folder, or say (OSError, one line) why it cannot be the watch's: the watch is then not attached,
    and /metrics says `qdebug_watch_up 0` instead of counters that never move."""
    from pathlib import Path

    from qdebug.outputs import probe_folder

    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise OSError(exc.errno, f"{ENV_DIR}={folder} is not a folder the watch can use ({exc.strerror or type(exc).__name__}); "
                      "expected a folder, or a path where one can be made") from None
    probe_folder(Path(folder), ENV_DIR)


class Watcher:
    """The registered checks (watch_registry) on one model runner, called at their points; their counters and findings log."""

    def __init__(self, runner, settings: WatchSettings) -> None:
        self.runner, self.settings = runner, settings
        self.clock = clock_of(runner)  # the plugin's own time in the worker (qdebug_watch_plugin_seconds_total)
        self.counters = WatchCounters(settings.folder, settings.run, self.clock)
        self.findings = FindingsLog(settings.folder, settings.log_bytes, on_dropped=self.counters.set_dropped)
        self.flight = FlightRecorder(runner, settings.folder)
        self.rng = random.Random(os.getpid())  # which steps the sampled checks take
        self.sampling = False  # this step is sampled
        self.items: dict[str, list] = {}  # request → its items (read once)
        self.counted: dict[str, set[tuple[str, int]]] = {}  # request → (check, item) of its once-per-item checks run
        self.loud: dict[str, int] = {}
        self.matrix = None
        self.step_cache: dict[str, object] = {}  # identifier → projected encoder rows, this step
        self.checks: list[WatchEntry] = [entry(self) for entry in entries()]
        self.sampled_checks = [c for c in self.checks if c.sampled]
        # ITEM: the once-per-item checks first (counts sees an item before placement does)
        self.at: dict[Point, list[WatchEntry]] = {p: sorted((c for c in self.checks if c.point == p), key=lambda c: not c.once_per_item)
                                                  for p in Point}

    def install(self) -> None:
        """Wrap the model's `embed_input_ids`, `compute_logits` and `embed_multimodal`; subscribe to the runner's steps."""
        runner, model = self.runner, self.runner.model
        embed = model.embed_input_ids
        logits = model.compute_logits
        model.compute_logits = lambda hidden, *a, **kw: self._logits(logits(hidden, *a, **kw))
        for check in self.checks:  # an encoder check wraps the encoder call (inside the batch recorder's wrapper)
            check.install()

        def embed_input_ids(*args, **kwargs):
            out = embed(*args, **kwargs)
            with self.clock:
                mm = kwargs.get("multimodal_embeddings", args[1] if len(args) > 1 else None)
                self.flight.open = True  # before the step's decoder: a violation here can be traced from its first row
                try:
                    if mm is not None and len(mm):
                        self._step(out)
                    self._dispatch(Point.MERGE, out)
                finally:
                    self.flight.open = False
            return out

        model.embed_input_ids = embed_input_ids
        hooks_of(runner).subscribe(WATCH, self)  # last: a watch that failed to install is not called on any step

    def before(self, scheduler_output) -> None:
        """Before vLLM's step (the runner's StepHooks, after the tracer): finished requests forgotten, the step sampled
        or not, every cache read of the step checked."""
        try:
            self.flight.note_step(scheduler_output)
            for rid in getattr(scheduler_output, "finished_req_ids", ()) or ():
                self.items.pop(rid, None)
                self.counted.pop(rid, None)
            self.sampling = self.settings.sample > 0 and self.rng.random() < self.settings.sample
            if self.flight.armed and self.settings.sample > 0 and self.flight.start_armed(scheduler_output):
                self.sampling = True  # the requests just recorded meet the checks that armed the recorder
            if self.sampling:
                for check in self.sampled_checks:
                    check.begin()
        except Exception as exc:
            log.warning("qdebug: watch: step not prepared (%s: %s)", type(exc).__name__, exc)
        self._dispatch(Point.STEP, scheduler_output)  # e.g. every cache read of the step (the clock's outer timer counts it)

    def after(self, scheduler_output, output) -> None:
        """After vLLM's step (raised or not): the sampled checks' hooks removed."""
        if self.sampling:
            self.sampling = False
            for check in self.sampled_checks:
                check.end()

    def _logits(self, logits):
        if self.sampling:
            with self.clock:
                self._dispatch(Point.LOGITS, logits)
        return logits

    def _dispatch(self, point: Point, at, rid: str = "") -> None:
        """Run the checks registered at `point` (a sampled one on a sampled step only)."""
        for check in self.at[point]:
            self._call(check, at, rid)

    def _call(self, check: WatchEntry, at, rid: str) -> None:
        """Run one check if it runs now (an unsampled one always, a sampled one on a sampled step; where it applies);
        whatever it raises is counted against it, never reaches vLLM."""
        try:
            if (self.sampling or not check.sampled) and check.applies():
                check.run(at, rid)
        except Exception as exc:  # its own `applies` or `run` (the default `run` guards itself)
            self._failed(check.check, rid, exc, 0.0)

    # the step ------------------------------------------------------------------------------------------
    def _step(self, out) -> None:
        """The ITEM checks (placement, counts) on every item whose placeholder rows this step computes."""
        try:
            runner = self.runner
            req_ids = list(runner.input_batch.req_ids)
            qsl = runner.query_start_loc.np[: len(req_ids) + 1]
            self.step_cache = {}
            for i, rid in enumerate(req_ids):
                state = runner.requests.get(rid)
                if state is None:
                    continue
                if rid not in self.items:
                    self.items[rid] = items_of(state)
                for item in self.items[rid]:
                    rows, enc = step_positions(item, int(state.num_computed_tokens), int(qsl[i + 1] - qsl[i]))
                    if not rows:
                        continue
                    at = ItemAt(rid, state, item, out, int(qsl[i]), rows, enc, req_ids)
                    counted = self.counted.setdefault(rid, set())
                    for check in self.at[Point.ITEM]:
                        if check.once_per_item:
                            if (check.check, item.index) in counted:
                                continue
                            counted.add((check.check, item.index))
                        self._call(check, at, rid)
        except Exception as exc:  # before any check could run: counted against the step's checks (placement)
            for check in self.at[Point.ITEM]:
                if not check.once_per_item:
                    self._failed(check.check, "", exc, 0.0)
        finally:
            self.step_cache = {}

    def run(self, check: str, rid: str, fn, *args) -> None:
        """Run one check, timed; its findings logged and counted; an exception counted and logged, never raised."""
        with self.clock:
            self._run(check, rid, fn, *args)

    def _run(self, check: str, rid: str, fn, *args) -> None:
        start = time.perf_counter()
        try:
            if check in self.settings.raising:
                raise RuntimeError(f"{ENV_RAISE} names {check}")
            found = fn(*args)
        except Exception as exc:
            self._failed(check, rid, exc, time.perf_counter() - start)
            return
        self.counters.add(check, seconds=time.perf_counter() - start, violations=len(found))
        for finding in found:
            self.record_and_report(finding)

    def record_and_report(self, finding: WatchFinding) -> None:
        """Log a violation with the flight recorder's trace of its request (when one can be recorded now)."""
        try:
            finding.trace = self.flight.record(finding.request_id, finding.cobatched)
        except Exception as exc:  # the finding is reported without its traces
            log.warning("qdebug: watch: no flight-recorder trace for %s (%s: %s)", shown(finding.request_id, 200),
                        type(exc).__name__, exc)
        self._report(finding)

    def _failed(self, check: str, rid: str, exc: Exception, seconds: float) -> None:
        self.counters.add(check, seconds=seconds, error=True)
        self.report_error(check, rid, exc)

    def report_error(self, check: str, rid: str, exc: Exception) -> None:
        """Log that `check` raised (its counters are the caller's)."""
        self._report(WatchFinding(check, WatchOutcome.ERROR, stage_of(check), rid, f"the check raised {type(exc).__name__}: {exc}"))

    def _report(self, finding: WatchFinding) -> None:
        self.findings.add(finding)  # caps the client's ids in place; a line lost reaches the counters (on_dropped)
        batches = getattr(getattr(self.runner, "_qdebug_tracer", None), "batches", None)
        if batches is not None:  # the batch log's lines a finding cites (its step, its encoder call) on disk at the step's end
            batches.write_at_step_end()
        seen = self.loud[finding.check] = self.loud.get(finding.check, 0) + 1
        if seen <= LOUD or seen % QUIET == 0:
            log.warning("qdebug: watch %s %s (#%d): request %s%s: %s", finding.check, finding.outcome, seen, finding.request_id,
                        f" (donors {', '.join(finding.donors)})" if finding.donors else "", finding.evidence[:300])

    # shared by the checks ----------------------------------------------------------------------------
    def projected(self, identifier: str):
        """An item's encoder rows, projected (once per step); None when vLLM's encoder cache no longer holds them."""
        if identifier not in self.step_cache:
            rows = (getattr(self.runner, "encoder_cache", None) or {}).get(identifier)
            if rows is None:
                self.step_cache[identifier] = None
            else:
                if self.matrix is None or self.matrix.shape[0] != rows.shape[-1] or self.matrix.device != rows.device:
                    self.matrix = projection(rows.shape[-1], rows.device)
                self.step_cache[identifier] = project(rows.reshape(-1, rows.shape[-1]), self.matrix)
        return self.step_cache[identifier]

    def step_finding(self, check: str, stage: str, req_ids: list[str], evidence: str, donors: list[str] | None = None) -> WatchFinding:
        """A violation about a step: its first request named, the others co-batched."""
        rid = req_ids[0] if req_ids else ""
        finding = self.finding(check, rid, self.runner.requests.get(rid), evidence, donors or [], req_ids)
        finding.stage = stage
        return finding

    def finding(self, check: str, rid: str, state, evidence: str, donors: list[str], req_ids: list[str]) -> WatchFinding:
        """A violation of `check` about one request (its client's name, donors and co-batched requests)."""
        name, _ = client_name(getattr(getattr(state, "sampling_params", None), "extra_args", None), rid)
        return WatchFinding(check, WatchOutcome.VIOLATION, stage_of(check), rid, evidence, client_id=name if name != rid else "",
                            donors=donors, cobatched=[r for r in req_ids if r != rid])

