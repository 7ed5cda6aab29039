"""Findings from a Batch's events: buffer contamination, desyncs and runtime errors (no torch)."""

from __future__ import annotations

from collections.abc import Iterable

from qdebug.findings import Finding
from qdebug.replay.batch import Batch, Event
from qdebug.vocab import EventKind, FindingKind, Severity, Verdict

from ..verdicts import worst


def _at_line(event: Event) -> str:
    """` (line N)` when the event came from a source line."""
    return "" if event.line is None else f" (line {event.line})"


def _num(value: int | None) -> str:
    """An optional number for a message."""
    return "?" if value is None else str(value)


def contaminating_events(events: list[Event]) -> list[Event]:
    """Overwrites by another request that happened before the victim's last sync (any, if it never synced).

    Events are taken in the order given: a Batch's events are in source order (`seq`).
    """
    last_sync: dict[str, int] = {}
    for i, e in enumerate(events):
        if e.kind == EventKind.SYNC and e.request_id is not None:
            last_sync[e.request_id] = i
    hits = []
    for i, e in enumerate(events):
        if e.kind != EventKind.BUFFER_OVERWRITE or e.request_id is None or e.donor is None:
            continue
        if e.donor == e.request_id:
            continue  # a request rewriting its own buffer mixes nothing in
        synced = last_sync.get(e.request_id)
        if synced is None or i < synced:
            hits.append(e)
    return hits


def contamination_from_events(events: Iterable[Event]) -> dict[str, str]:
    """Victim id -> donor id for buffers overwritten by another request before the victim synced."""
    result: dict[str, str] = {}
    for e in contaminating_events(list(events)):
        if e.request_id is not None and e.donor is not None:  # contaminating_events keeps only those
            result[e.request_id] = e.donor  # in event order, so the last donor before the sync wins
    return result


def findings_from_events(events: Iterable[Event]) -> list[Finding]:
    """One Finding per contaminating overwrite, desync, shape mismatch and index-out-of-bounds, in event order."""
    events = list(events)
    contaminating = {id(e) for e in contaminating_events(events)}
    found = (finding_for_event(e, id(e) in contaminating) for e in events)
    return [f for f in found if f is not None]


def finding_for_event(e: Event, contaminating: bool = False) -> Finding | None:
    """The Finding one event stands for (an overwrite only when it is `contaminating`), or None."""
    if contaminating:
        at = "" if e.offset is None else f" at offset {e.offset}"
        return Finding(
            kind=FindingKind.CONTAMINATION, severity=Severity.ERROR, request_id=e.request_id, donor=e.donor,
            message=(
                f"request {e.request_id}'s visual buffer{at} was overwritten by request {e.donor} "
                f"before it was stitched{_at_line(e)}"
            ),
        )
    if e.kind == EventKind.DESYNC:
        who = "" if e.request_id is None else f" for request {e.request_id}"
        return Finding(
            kind=FindingKind.DESYNC, severity=Severity.WARNING, request_id=e.request_id,
            message=(
                f"visual token offset {_num(e.offset)} differs from textual offset "
                f"{_num(e.text_offset)}{who}{_at_line(e)}"
            ),
        )
    if e.kind == EventKind.SHAPE_MISMATCH:
        detail = e.message.strip() or "visual embedding shape mismatch"
        return Finding(kind=FindingKind.SHAPE_MISMATCH, severity=Severity.ERROR, request_id=e.request_id, message=f"{detail}{_at_line(e)}")
    if e.kind == EventKind.INDEX_OUT_OF_BOUNDS:
        return Finding(
            kind=FindingKind.INDEX_OUT_OF_BOUNDS, severity=Severity.ERROR, request_id=e.request_id,
            message=f"token index {_num(e.offset)} exceeds sequence length {_num(e.tokens)}{_at_line(e)}",
        )
    return None


def request_verdicts_from_events(batch: Batch) -> dict[str, Verdict]:
    """Request id -> "contaminated" | "desync" | "error" | "ok", for every request of the batch and its events.

    A request whose capture line could not be used (BatchRequest.error) is an "error" too;
    errors without a request id belong to no request.
    """
    verdicts: dict[str, Verdict] = {r.request_id: (Verdict.ERROR if r.error else Verdict.OK) for r in batch.requests}

    def mark(rid: str | None, verdict: Verdict) -> None:
        if rid is not None:  # the worse verdict wins: a contaminated request that also desynced is contaminated
            verdicts[rid] = worst(verdicts.get(rid, Verdict.OK), verdict)

    for e in batch.events:
        if e.kind in (EventKind.SHAPE_MISMATCH, EventKind.INDEX_OUT_OF_BOUNDS):
            mark(e.request_id, Verdict.ERROR)
        elif e.kind == EventKind.DESYNC:
            mark(e.request_id, Verdict.DESYNC)
        else:
            mark(e.request_id, Verdict.OK)
            mark(e.donor, Verdict.OK)
    for victim in contamination_from_events(batch.events):
        mark(victim, Verdict.CONTAMINATED)
    return verdicts


def offsets_from_events(events: Iterable[Event]) -> dict[str, tuple[int | None, int | None]]:
    """Request id -> (text_offset, visual_offset): its last desync, else its own last buffer write."""
    from_desync: dict[str, tuple[int | None, int | None]] = {}
    from_write: dict[str, tuple[int | None, int | None]] = {}
    for e in events:
        if e.kind == EventKind.DESYNC and e.request_id is not None:
            from_desync[e.request_id] = (e.text_offset, e.offset)
        elif e.kind == EventKind.BUFFER_WRITE and e.request_id is not None:
            from_write[e.request_id] = (None, e.offset)
        elif e.kind == EventKind.BUFFER_OVERWRITE and e.donor is not None:
            # The overwrite is the donor's own write, landing on the victim's slot.
            from_write[e.donor] = (None, e.offset)
    result = dict(from_write)
    result.update(from_desync)
    return result
