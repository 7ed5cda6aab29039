"""Re-execute a captured burst: isolated references, then threads or one batch, with optional faults."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from qdebug.errors import InputError, first_line
from qdebug.trace.cached import computed_positions
from qdebug.trace.items import trace_items
from qdebug.trace.protocols import Fault
from qdebug.trace.runner import RecordPolicy, trace_request
from qdebug.trace.tensor_names import TensorKind as T

from .batch import Batch
from .batched import BatchedRow, run_batched
from .events import EventLog, RequestEvents
from .fault_registry import Command, PlantContext, Planter, parse_inject
from .shared_buffer import ScheduleCancelled

MODES = ("threads", "batched")


@dataclass
class ReplaySettings:
    """How to re-execute: mode, concurrency, which fault, the schedule seed."""

    mode: str = "threads"
    concurrency: int = 4
    inject: str = "none"
    seed: int = 0


@dataclass
class ReplayRun:
    """Raw results of a replay, before analysis."""

    settings: ReplaySettings
    references: dict = field(default_factory=dict)  # id → isolated Trace
    traces: dict = field(default_factory=dict)  # id → replayed Trace (threads mode)
    batched: dict[str, BatchedRow] = field(default_factory=dict)  # id → its row of the batch (batched mode)
    errors: dict = field(default_factory=dict)  # id → one-line reason
    events: EventLog = field(default_factory=EventLog)
    interrupted: bool = False


def check_settings(settings: ReplaySettings) -> None:
    """Refuse combinations that make no sense before any work starts."""
    if settings.mode not in MODES:
        raise InputError(f"--mode {settings.mode}: expected one of {', '.join(MODES)}")
    if settings.concurrency < 1:
        raise InputError(f"--concurrency {settings.concurrency}: expected at least 1")
    if parse_inject(settings.inject, Command.REPLAY) is not None and settings.mode == "batched":
        raise InputError(f"--inject {settings.inject} acts on one request's sync step; use --mode threads")


def replay(
    loaded,
    batch: Batch,
    settings: ReplaySettings,
    on_progress: Callable[[str, str, bool], None] | None = None,
    cancel: threading.Event | None = None,
    references: dict | None = None,
    fault_factory: Callable[[str, RequestEvents], tuple[Fault, ...]] | None = None,
) -> ReplayRun:
    """Run every request with a payload alone (the reference), then again under `settings`.

    `on_progress(phase, request_id, clean)` is called after each request ("reference" / "replay"); `clean`
    says whether the replayed rows still match the request's own encoder rows. Setting `cancel` (or Ctrl-C)
    stops early: what finished is kept and `interrupted` is set. `references` reuses isolated traces by id.
    `fault_factory(request_id, events)` adds faults of the caller's own to each replayed request (threads mode);
    `events(kind, **fields)` logs what such a fault says about itself.
    """
    check_settings(settings)
    cancel = cancel or threading.Event()
    run = ReplayRun(settings, references=dict(references or {}))
    progress = on_progress or (lambda phase, rid, clean: None)
    items = [(r.request_id, r.request) for r in batch.requests if r.request is not None]
    options = RecordPolicy(attn_layers=None, hidden_rows=False)  # replay keeps no hidden states (2N traces)
    try:
        for rid, request in items:
            if cancel.is_set():
                raise KeyboardInterrupt
            if rid in run.references:
                continue
            try:
                run.references[rid] = trace_request(loaded, request, options)
            except Exception as exc:  # one bad request must not stop the burst
                run.errors[rid] = f"reference run failed: {first_line(exc)}"
            progress("reference", rid, True)
        live = [(rid, req) for rid, req in items if rid in run.references]
        if settings.mode == "batched":
            for rid, req in live:  # one padded batch of images: a video's frames would be dropped, so refuse it
                if req.videos:
                    run.errors[rid] = "video requests replay one request per thread: expected --mode threads"
            live = [(rid, req) for rid, req in live if not req.videos]
            if live:
                run.batched = run_batched(loaded, live, run.events)
            for rid, _ in live:
                progress("replay", rid, True)
        else:
            _replay_threads(loaded, live, settings, run, options, progress, cancel, fault_factory)
    except KeyboardInterrupt:
        run.interrupted = True
        cancel.set()
    return run


def _replay_threads(loaded, items, settings: ReplaySettings, run: ReplayRun, options, progress, cancel, fault_factory=None) -> None:
    """Replay in waves of `concurrency` threads sharing one model; the --inject preset plants its fault per wave and request."""
    injection = parse_inject(settings.inject, Command.REPLAY)
    planter = injection.planter(PlantContext(Command.REPLAY, loaded, settings.seed)) if injection is not None else Planter()
    for start in range(0, len(items), settings.concurrency):
        wave = items[start : start + settings.concurrency]
        planter.wave(wave, start)
        threads = [
            threading.Thread(target=_worker, args=(loaded, rid, req, planter, run, options, progress, fault_factory), daemon=True)
            for rid, req in wave
        ]
        for t in threads:
            t.start()
        try:
            for t in threads:
                while t.is_alive():
                    t.join(0.1)
                    if cancel.is_set():
                        raise KeyboardInterrupt
        except KeyboardInterrupt:
            planter.cancel()
            for t in threads:
                t.join(30)
            raise


def _worker(loaded, rid, request, planter: Planter, run: ReplayRun, options, progress, fault_factory=None) -> None:
    events = run.events.for_request(rid)
    try:
        faults: tuple[Fault, ...] = tuple(planter.faults(rid, request, events))  # a preset's failure is this request's error
        if fault_factory is not None:
            faults += tuple(fault_factory(rid, events))
        trace = trace_request(loaded, request, options, faults=faults, listener=events)
    except ScheduleCancelled:
        run.errors[rid] = "interrupted"
        return
    except Exception as exc:
        run.errors[rid] = f"replay failed: {first_line(exc)}"
        planter.failed(rid, request)
        return
    run.traces[rid] = trace
    progress("replay", rid, _clean(trace, run.references.get(rid)))


def _clean(trace, reference) -> bool:
    """Whether the rows that landed in the replayed stream equal the request's own encoder rows."""
    import torch

    if reference is None:
        return True
    landed = landed_rows(trace)
    own = encoded_rows(reference)
    return landed is None or own is None or (landed.shape == own.shape and bool(torch.allclose(landed, own)))


def landed_rows(trace):
    """Rows found at every media item's placeholder positions (images, videos, clips; item by item) in the embeddings
    the decoder received: of the positions the run computed (an engine trace whose prefix a cache served holds none of
    the positions before it; `landed_index` says which item rows these are)."""
    embeds = trace.tensor_or_none(T.SYNC_EMBEDS)
    _, rows = computed_positions(trace, [p for item in trace_items(trace) for p in item.positions])
    if embeds is None or not rows or rows[-1] >= embeds.shape[0]:
        return None
    return embeds[rows]


def landed_index(trace) -> list[int] | None:
    """Which of the items' placeholder rows (item by item, as `encoded_rows` lays them out) `landed_rows` holds: None
    when it holds every one, else their indexes (the rest were served from a prefix cache, not computed in the run)."""
    positions = [p for item in trace_items(trace) for p in item.positions]
    kept, _ = computed_positions(trace, positions)
    return None if len(kept) == len(positions) else kept


def encoded_rows(trace):
    """The trace's encoder output rows, every media item's in item order; None when an item an engine's prefix cache
    served whole has none (that run never encoded it, and the other items' rows would not line up with their places)."""
    import torch

    items = trace_items(trace)
    if any(i.wholly_cached and not trace.has_tensor(T.ENCODE, item=i.item) for i in items):
        return None
    rows = [trace.tensor(T.ENCODE, item=i.item) for i in items if trace.has_tensor(T.ENCODE, item=i.item)]
    return torch.cat(rows) if rows else None
