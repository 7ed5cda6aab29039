"""What `qdebug replay` shows (Rich): a runtime log's summary, or a replay's tables and findings; the interrupted note."""

from __future__ import annotations

from .findings import findings_panel
from .log_summary import log_renderables
from .replay_tables import matrix_table, requests_table, timeline_table


def replay_renderables(report) -> list:
    """What `qdebug replay` shows: a runtime log's summary, else the requests, the matrix, the timeline and the findings."""
    if report.kind == "runtime-log":
        return log_renderables(report)
    return [requests_table(report), matrix_table(report), *(() if report.endpoint else (timeline_table(report),)), findings_panel(report.findings)]


def interrupted_note(report, word: str) -> str:
    """The status line of a replay stopped by Ctrl-C or SIGTERM (`word`): what its report covers."""
    meta = getattr(report.log_index, "meta", None)
    if meta:
        return (f"{word} after {meta['total_lines']:,} lines ({meta['bytes_read']:,} of {meta['bytes_total']:,} bytes): "
                "the report covers what was read")
    return f"{word}: the report covers the requests that finished"
