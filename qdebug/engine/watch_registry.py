"""The one registry of watch checks: which checks the Watcher runs, where in vLLM's step each runs, sampled or not,
what it reads, and whether its violation records a trace.

A check is one `WatchEntry` subclass decorated with `@register`, in a module of ENTRY_MODULES (its name a
`vocab.WatchCheck`); the Watcher makes one of each per runner and calls them at their point, so adding a check touches
neither the Watcher nor the trace table (watch_traces.py). Nothing here imports torch: the views read this table.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar

from qdebug.vocab import WATCH_CHECKS, StageName

if TYPE_CHECKING:
    from .watch_log import WatchFinding


class Point(StrEnum):
    """Where in a step a check runs (the Watcher dispatches STEP, ITEM, MERGE and LOGITS; an ENCODER or DECODER check
    listens through what its `install`/`begin` attach)."""

    STEP = "step"  # before vLLM's step (the runner's StepHooks): `run(scheduler_output)`
    ITEM = "item"  # at the merge of visual rows, per item whose rows the step computes: `run(ItemAt)`
    MERGE = "merge"  # at the merge of visual rows, once per step (text-only steps too): `run(merged rows)`
    ENCODER = "encoder"  # in the model's encoder call (`embed_multimodal`)
    DECODER = "decoder"  # inside the step's decoder layers
    LOGITS = StageName.LOGITS.value  # after the decoder, on the rows the step samples from: `run(logits)`


# a violation found before the step's decoder records its request's trace from the first row; one after it arms the
# flight recorder for the next step's new requests instead
BEFORE_DECODER_POINTS = frozenset({Point.STEP, Point.ITEM, Point.MERGE, Point.ENCODER})


class Need(StrEnum):
    """What a check reads."""

    SCHEDULE = "schedule"  # the step's scheduler output
    CACHE_READS = "cache_reads"  # the cache witness's reads of the step (engine/cache_reads.py)
    ITEMS = "items"  # the step's requests, their items and row slices
    MERGED_ROWS = "merged_rows"  # the decoder-input rows after the merge
    ENCODER_CACHE = "encoder_cache"  # vLLM's encoder cache (each item's encoder rows)
    ENCODER_CALL = "encoder_call"  # an encoder call's inputs and outputs, and the batch recorder's (request, item)s
    MROPE = "mrope"  # the MRoPE ids the step feeds, and the model's own rope index
    LAYERS = "layers"  # the decoder layers' q/k/v projections and attention kernels
    LOGITS = StageName.LOGITS.value  # the logits rows the step samples from


@dataclass(frozen=True)
class ItemAt:
    """One item whose placeholder rows this step computes: its request, the merged rows and where its rows are."""

    rid: str
    state: Any  # vLLM's request state
    item: Any  # watch_checks.Item
    out: Any  # the step's merged rows
    start: int  # the request's first row in `out`
    rows: list[int]  # the item's placeholder rows this step (relative to `start`)
    enc: list[int]  # their encoder rows
    req_ids: list[str]  # the step's requests


class WatchEntry:
    """One watch check on one runner: its name, point, sampling, needs and findings stage; what it does there."""

    check: ClassVar[str]  # a vocab.WatchCheck: the `check` label of its series and findings lines
    point: ClassVar[Point]
    sampled: ClassVar[bool]  # on QDEBUG_VLLM_WATCH_SAMPLE's share of steps (or calls) only
    needs: ClassVar[frozenset[Need]]
    stage: ClassVar[str] = ""  # the pipeline stage its findings (and its errors) name; "" when each finding says its own
    once_per_item: ClassVar[bool] = False  # ITEM: once per item of a request, whatever steps its rows take

    def __init__(self, watcher: Any) -> None:
        self.watcher = watcher  # the runner's watch_engine.Watcher (not imported: it imports this table)

    @classmethod
    def records_trace(cls) -> bool:
        """Whether its violation records the request's own trace (it runs before the step's decoder)."""
        return cls.point in BEFORE_DECODER_POINTS

    def install(self) -> None:
        """Once, when the Watcher installs: wrap what it listens to (the default: nothing)."""

    def applies(self) -> bool:
        """Whether it can run on this runner now (the default: always)."""
        return True

    def begin(self) -> None:
        """A sampled step starts (a sampled check attaches its hooks)."""

    def end(self) -> None:
        """The sampled step ended, raised or not (its hooks removed)."""

    def run(self, at: Any, rid: str = "") -> None:
        """Run at its point: timed, counted and reported through the Watcher (errors swallowed)."""
        self.watcher.run(self.check, rid, self.findings, at)

    def findings(self, at: Any) -> list[WatchFinding]:
        """Its violations at `at` (what `run` passes)."""
        raise NotImplementedError(f"watch check {self.check} says nothing at {self.point}")


# the modules whose entries are the plugin's checks (each registers its own on import)
ENTRY_MODULES = ("watch_cache", "watch_merge", "watch_sampled", "watch_encoder")
_ENTRIES: dict[str, type[WatchEntry]] = {}
_loaded = False


def register(cls: type[WatchEntry]) -> type[WatchEntry]:
    """Class decorator: add a check to the registry (a name may be registered once)."""
    if cls.check in _ENTRIES and _ENTRIES[cls.check] is not cls:
        raise ValueError(f"watch check {cls.check} registered twice ({_ENTRIES[cls.check].__name__}, {cls.__name__})")
    _ENTRIES[cls.check] = cls
    return cls


def unregister(check: str) -> None:
    """Remove a check (tests that register one of their own)."""
    _ENTRIES.pop(check, None)


def entries(point: Point | None = None) -> list[type[WatchEntry]]:
    """Every registered check (those at `point`, when given): vocab's order, then others in the order registered."""
    _load()
    known = [c.value for c in WATCH_CHECKS]
    ordered = sorted(_ENTRIES.values(), key=lambda e: known.index(e.check) if e.check in known else len(known))
    return [e for e in ordered if point is None or e.point == point]


def stage_of(check: str) -> str:
    """The pipeline stage a check's findings name ("" for a check not registered)."""
    _load()
    entry = _ENTRIES.get(check)
    return entry.stage if entry is not None else ""


def _load() -> None:
    """Import every module of ENTRY_MODULES once: each registers its checks."""
    global _loaded
    if _loaded:
        return
    for name in ENTRY_MODULES:
        importlib.import_module(f"{__package__}.{name}")
    _loaded = True
