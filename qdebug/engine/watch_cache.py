"""The watch's `cache` check: every cache read of every request (not sampled), judged from qdebug's own fingerprints of
what each request sent (engine/cache_reads.py), never from the engine's keys.

Where it runs: in the worker, before each step runs (the watch's step hook). The plugin's `CacheWitness`
(`runner._qdebug_witness`, stepped first by the tracer's step hook) gives the reads found in this step: the engine core's
prefix-, processor- and KV-connector reads of the requests whose first step this is, and the encoder-cache reads of
the items this step computes without having encoded them. One check is one read: `other_content` is a violation
(another request's content served to this one: a findings line naming the cache, the reused range and the donor),
`same_content` is legitimate reuse, `unverified` (no record of who computed it, or an item qdebug did not see) is
neither: every read is counted by cache and reuse in `qdebug_watch_cache_reads_total`.
"""

from __future__ import annotations

import time

from qdebug.vocab import CacheKind, StageName, WatchCheck, WatchOutcome

from .cache_reads import CacheRead, parsed_reads, wrong_doc
from .watch_log import WatchFinding
from .watch_registry import Need, Point, WatchEntry, register
from .watch_settings import ENV_RAISE

# the pipeline stage whose output each cache hands over: the processor's inputs (preprocess), the encoder's rows
# (encode), and KV of prompt positions (sync: the token stream, media rows merged in, that the reused KV was computed from)
STAGE = {CacheKind.PROCESSOR: StageName.PREPROCESS, CacheKind.ENCODER: StageName.ENCODE, CacheKind.PREFIX: StageName.SYNC,
         CacheKind.CONNECTOR: StageName.SYNC}


def evidence(read: CacheRead) -> str:
    """A wrong read in words: the cache, the reader's range, the donor (and its range when it differs) and why the
    content is not the reader's (both fingerprints)."""
    donor = read.origin or "no one on record"
    if read.origin_name and read.origin_name != read.origin:
        donor += f" ({read.origin_name})"
    theirs = ""
    if read.origin_start is not None and read.origin_end is not None and (read.origin_item, read.origin_start, read.origin_end) != (read.item, read.start, read.end):
        item = f"item {read.origin_item}, " if read.origin_item is not None else ""
        theirs = f" (its {item}positions {read.origin_start}..{read.origin_end - 1})"
    return f"{read.cache} served {read.what()} computed by {donor}{theirs}: {read.why}"


def finding(read: CacheRead, step_ids: list[str]) -> WatchFinding:
    """The findings line of one read that served another request's content."""
    return WatchFinding(WatchCheck.CACHE, WatchOutcome.VIOLATION, STAGE.get(read.cache, ""), read.reader, evidence(read),
                        client_id=read.reader_name, donors=[read.origin] if read.origin else [],
                        cobatched=[r for r in step_ids if r != read.reader])


def starting(scheduler_output) -> set[str]:
    """The requests whose first step this is: the flight recorder traces them from their first computed position
    (after the positions a prefix cache served them, which the trace records as read from the cache)."""
    return {str(new.req_id) for new in getattr(scheduler_output, "scheduled_new_reqs", ()) or ()}


@register
class CacheCheck(WatchEntry):
    """Every cache read of every step, before the step runs."""

    check = WatchCheck.CACHE
    point = Point.STEP
    sampled = False
    needs = frozenset({Need.SCHEDULE, Need.CACHE_READS})
    stage = ""  # each finding names its cache's stage (STAGE)

    def run(self, at, rid: str = "") -> None:
        """One check per read, counted here (`check_step`), not one per step."""
        check_step(self.watcher, at)


def check_step(watcher, scheduler_output) -> None:
    """The cache check on one step's reads: counted (one check per read), each wrong read logged with the flight
    recorder's trace of its reader; an exception is counted against every read of the step and never raised."""
    witness = getattr(watcher.runner, "_qdebug_witness", None)
    if witness is None:  # the plugin's tracer is not attached (its folder not writable): no provenance to check
        return
    start = time.perf_counter()
    reads: list[dict] = []
    try:
        reads = witness.observe(scheduler_output)  # idempotent: the tracer's wrapper observed this step first
        if not reads:
            return
        if WatchCheck.CACHE in watcher.settings.raising:
            raise RuntimeError(f"{ENV_RAISE} names {WatchCheck.CACHE}")
        wrong = parsed_reads(d for d in reads if wrong_doc(d))  # a legitimate read is counted, never parsed
        found = []
        if wrong:
            step_ids = [str(r) for r in getattr(scheduler_output, "num_scheduled_tokens", None) or {}]
            found = [finding(r, step_ids) for r in wrong]
    except Exception as exc:
        watcher.counters.add(WatchCheck.CACHE, seconds=time.perf_counter() - start, error=True, checks=max(len(reads), 1))
        watcher.report_error(WatchCheck.CACHE, "", exc)
        return
    watcher.counters.add(WatchCheck.CACHE, seconds=time.perf_counter() - start, violations=len(found), checks=len(reads))
    watcher.counters.add_reads([f"{r.get('cache')}/{r.get('reuse')}" for r in reads])
    if found:
        record(watcher, found, scheduler_output)


def record(watcher, found: list[WatchFinding], scheduler_output) -> None:
    """Report each finding with its reader's flight-recorder trace: this step's decoder has not run yet, so a reader
    (and co-batched requests) whose first step this is is traced from its first computed row."""
    flight = watcher.flight
    try:
        flight.open, flight.starting = True, starting(scheduler_output)
        for f in found:
            watcher.record_and_report(f)
    finally:
        flight.open, flight.starting = False, set()
