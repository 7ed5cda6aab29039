"""The Rich report of a runtime log at any size: counts, worst requests, overwrites per minute, first findings."""

from __future__ import annotations

import datetime as dt

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from qdebug.vocab import Verdict

from .data_text import data
from .findings import findings_panel
from .palette import verdict_style
from .replay_tables import matrix_table, requests_table, timeline_table

# Up to these sizes the full per-request and per-event tables are printed as well.
SMALL_REQUESTS = 40
SMALL_EVENTS = 400
WORST = 15
HISTOGRAM_ROWS = 30
_BLOCKS = " ▏▎▍▌▋▊▉█"


def _when(t: float | None) -> str:
    return "–" if t is None else dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def counts_table(report) -> Table:
    """Lines, events, requests per verdict and findings per kind."""
    index = report.log_index
    meta = index.meta
    table = Table(title=data(f"runtime log: {report.source}"), show_header=False)
    table.add_column("what")
    table.add_column("count", justify="right")
    first, last = index.time_range()
    table.add_row("lines read", f"{meta.get('total_lines', 0):,}" + (" (interrupted)" if report.interrupted else ""))
    table.add_row("unrecognised lines", f"{meta.get('unknown_lines', 0):,}")
    table.add_row("events", f"{meta.get('events', 0):,}")
    table.add_row("time span", data(f"{_when(first)} → {_when(last)} UTC" if first is not None else "no timestamps"))
    for verdict, n in sorted(index.verdict_counts().items(), key=lambda kv: -kv[1]):
        table.add_row(data(f"requests {verdict}", verdict_style(verdict)), f"{n:,}")
    for kind, n in index.finding_counts().items():
        table.add_row(data(f"findings: {kind}"), f"{n:,}")
    if report.event_filter is not None and report.event_filter.active:
        table.add_row("events shown (filter)", f"{index.count_events(report.event_filter):,}")
    return table


def worst_table(report, limit: int = WORST) -> Table:
    """The worst requests: contaminated first (with donor), then desync, then errors."""
    table = Table(title=f"worst requests (top {limit})")
    for col in ("id", "verdict", "donor", "text@", "visual@", "line"):
        table.add_column(col, no_wrap=True)
    for rid, verdict, donor, text_at, visual_at, line in report.log_index.requests(worst_first=True, limit=limit):
        if verdict == Verdict.OK:
            break
        table.add_row(data(rid), data(verdict, verdict_style(verdict)), data(donor or ""),
                      "–" if text_at is None else f"{text_at:d}", "–" if visual_at is None else f"{visual_at:d}", "–" if line is None else f"{line:d}")
    return table


def histogram(report, rows: int = HISTOGRAM_ROWS) -> Table | Text:
    """Contaminating overwrites per minute as horizontal bars (minutes merged when the log spans many)."""
    counts = report.log_index.per_minute(contaminating_only=True)
    if not counts:
        return Text("no contaminating overwrite in this log", style="dim")
    lo, hi = counts[0][0], counts[-1][0]
    width = max(1, -(-(hi - lo + 1) // rows))  # minutes per row
    bins: dict[int, int] = {}
    for minute, n in counts:
        key = lo + (minute - lo) // width * width
        bins[key] = bins.get(key, 0) + n
    top = max(bins.values())
    table = Table(title=f"contaminating overwrites per {'minute' if width == 1 else f'{width:d} minutes'} (UTC)", show_header=False)
    table.add_column("from")
    table.add_column("count", justify="right")
    table.add_column("bar")
    for key in range(lo, hi + 1, width):
        n = bins.get(key, 0)
        eighths = round(40 * 8 * n / top)
        bar = "█" * (eighths // 8) + (_BLOCKS[eighths % 8] if eighths % 8 else "")
        table.add_row(data(_when(key * 60)[:-3]), f"{n:,}", Text(bar, style="red"))
    return table


def filtered_events_table(report, limit: int = SMALL_EVENTS) -> Table:
    """The events the filter (--request, --kind, --since, --until) selects, in log order: the first `limit` of them."""
    flt = report.event_filter
    total = report.log_index.count_events(flt)
    table = Table(title=f"events shown (filter): {total:,}")
    for col in ("line", "time (UTC)", "kind", "request", "donor", "offset", "message"):
        table.add_column(col, no_wrap=col != "message", overflow="fold")
    for e in report.events[:limit]:
        table.add_row("" if e.line is None else f"{e.line:d}", data(_when(e.t)[11:] if e.t is not None else "–"), data(e.kind), data(e.request_id or ""),
                      data(e.donor or ""), "" if e.offset is None else f"{e.offset:d}", data(e.message))
    if total > limit:
        table.caption = f"first {min(limit, len(report.events)):,} of {total:,}; --jsonl for all of them"
    return table


def log_renderables(report) -> list:
    """What `qdebug replay LOG` prints: the full tables for a small log, a summary for any log."""
    index = report.log_index
    out: list[RenderableType] = []
    small = index.request_count() <= SMALL_REQUESTS and index.count_events(report.event_filter) <= SMALL_EVENTS
    if small:
        out += [requests_table(report), matrix_table(report), timeline_table(report)]
    out += [counts_table(report), worst_table(report), histogram(report)]
    if not small and report.event_filter is not None and report.event_filter.active:
        out.append(filtered_events_table(report))  # what the filter asked for, not only its count
    findings = report.findings if small else report.findings[:20]
    out.append(findings_panel(findings))
    if not small and len(report.findings) > 20:
        out.append(Text("… first 20 findings shown; --json, --jsonl, --kind or --request for the rest", style="dim"))
    return [Group(*out)]
