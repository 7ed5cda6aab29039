"""A ReplayReport over a runtime log's index: a page of requests and events in memory, the rest on disk."""

from __future__ import annotations

from collections.abc import Iterator

from qdebug.findings import Finding
from qdebug.vocab import FindingKind, Severity
from qdebug.replay.log_index import EventFilter, LogIndex
from qdebug.replay.report import ReplayReport, RequestOutcome

from .detectors.log_findings import finding_for_event

# What a report keeps in memory for the Rich tables and the TUI's first screen; JSON streams everything.
REQUEST_PAGE = 2_000
EVENT_PAGE = 5_000
FINDING_PAGE = 2_000
CELL_PAGE = 2_000


def outcome_from_row(row: tuple) -> RequestOutcome:
    """A RequestOutcome from a LogIndex.requests row."""
    rid, verdict, donor, text_offset, visual_offset, line = row
    return RequestOutcome(id=rid, verdict=verdict, donor=donor, text_offset=text_offset, visual_offset=visual_offset, line=line)


def change_findings(meta: dict) -> list[Finding]:
    """What happened to the files while they were read: appended to (read up to their size at the start) or truncated."""
    out = []
    for c in meta.get("changes", []):
        if c["change"] == "grew":
            out.append(Finding(FindingKind.LOG_GREW, Severity.WARNING,
                               f"{c['path']} grew from {c['size_at_start']:,} to {c['size_at_end']:,} bytes while it was read; "
                               f"read up to its size at the start ({c['size_at_start']:,} bytes): run again for the rest"))
        else:
            out.append(Finding(FindingKind.LOG_SHRANK, Severity.ERROR,
                               f"{c['path']} shrank from {c['size_at_start']:,} to {c['size_at_end']:,} bytes while it was read "
                               f"(truncated, as copytruncate rotation does); the report covers only the {c['bytes_read']:,} bytes read before"))
    return out


def iter_findings(index: LogIndex, flt: EventFilter | None = None, limit: int = -1) -> Iterator[Finding]:
    """Every finding of the log: first what happened to the files while read, then the events' (in source order)."""
    yield from change_findings(index.meta)
    for event, contaminating in index.findings(flt, limit):
        finding = finding_for_event(event, contaminating)
        if finding is not None:
            yield finding


def iter_cells(index: LogIndex, request: str | None = None, limit: int = -1) -> Iterator[dict]:
    """The contamination cells of a log: each contaminated request, its donor and the overwrite line that shows it."""
    for victim, donor, event in index.cells(request, limit):
        where = "" if event.line is None else f"line {event.line}: "
        yield {"request_id": victim, "donor": donor, "score": 1.0, "evidence": f"{where}{event.message}"}


def report_from_index(index: LogIndex, flt: EventFilter | None = None, interrupted: bool = False) -> ReplayReport:
    """The report of a log: verdicts of the whole log; events and findings as the filter selects.

    Small logs are held whole; a large one keeps its worst REQUEST_PAGE requests, first EVENT_PAGE events and
    CELL_PAGE cells in memory and is read from `report.log_index` by whoever needs the rest (JSON streams all).
    """
    flt = flt or EventFilter()
    meta = index.meta
    n_requests = index.request_count() if flt.request is None else 1
    worst_first = n_requests > REQUEST_PAGE
    requests = [outcome_from_row(r) for r in index.requests(flt.request, worst_first=worst_first, limit=REQUEST_PAGE)]
    events = list(index.events(flt, limit=EVENT_PAGE))
    findings = list(iter_findings(index, flt, FINDING_PAGE))
    cells = list(iter_cells(index, flt.request, CELL_PAGE))
    sources = meta.get("sources") or [str(index.path)]
    return ReplayReport(
        source=sources[0] if len(sources) == 1 else " + ".join(sources), kind="runtime-log",
        requests=requests, contamination_ids=[r.id for r in requests], contamination=None, cells=cells,
        events=events, findings=findings, unknown_lines=int(meta.get("unknown_lines", 0)), interrupted=interrupted,
        log_index=index, event_filter=flt,
    )
