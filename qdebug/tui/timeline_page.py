"""One page of a report's offset timeline as text: a page of its events (a big log's read from its index, never all
at once), the lanes of the requests in that page, and a heading that gives the true totals and says it is a page.

Built in a worker thread for a large report (`TimelinePictureScreen`); nothing here touches a widget.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import RenderableType

PAGE = 500  # events a page draws: about 120 lanes of a busy log, a few tenths of a second to build and render
INLINE_EVENTS = 400  # a report this small is drawn on the UI thread at once (one page, a few ms)


@dataclass
class TimelinePage:
    """What one page shows: the lanes and per-request glyphs (a Rich renderable) and the heading line."""

    body: RenderableType
    heading: str
    page: int
    pages: int


def event_total(report) -> int:
    """How many events the report's source holds: the whole log's (through its index), else the report's."""
    index = getattr(report, "log_index", None)
    if index is not None:
        return max(index.count_events(report.event_filter), len(report.events))
    return len(report.events)


def request_total(report) -> int:
    """How many requests the report's source holds: the whole log's, else the report's."""
    index = getattr(report, "log_index", None)
    if index is not None and getattr(report.event_filter, "request", None) is None:
        return max(index.request_count(), len(report.requests))
    return len(report.requests)


def is_small(report) -> bool:
    """Whether the timeline fits one page small enough to draw on the UI thread."""
    return event_total(report) <= INLINE_EVENTS and len(report.requests) <= INLINE_EVENTS


def _page_events(report, page: int, size: int, total: int) -> list:
    """The events of page `page`: a log's from its index when the report holds only its first page."""
    first = page * size
    index = getattr(report, "log_index", None)
    if index is not None and total > len(report.events):
        return list(index.events(report.event_filter, offset=first, limit=size))
    return list(report.events[first:first + size])


def build_page(report, page: int, width: int, size: int | None = None, step: Callable[[str], None] = lambda what: None,
               cancelled: Callable[[], bool] = lambda: False) -> TimelinePage | None:
    """Page `page` (clamped) of the timeline at `width` cells, `size` events a page (PAGE); `step(what)` is called
    before each of its 3 steps; None when `cancelled()` says so between steps."""
    from rich.console import Group

    from qdebug.render.replay_tables import timeline_table

    from .widgets.event_timeline import timeline_text

    size = size or PAGE
    total = event_total(report)
    pages = max(1, -(-total // size))
    page = min(max(0, page), pages - 1)
    step("reading events")
    if pages == 1 and len(report.events) >= total:
        view = report  # the whole report: every request's lane, as the batch screen draws it
    else:
        events = _page_events(report, page, size, total)
        ids = {e.request_id for e in events if e.request_id}
        view = replace(report, events=events, requests=[r for r in report.requests if r.id in ids])
    if cancelled():
        return None
    step("drawing lanes")
    lanes = timeline_text(view, width, None, listed=False)
    if cancelled():
        return None
    step("listing each request's events")
    body = Group(lanes, timeline_table(view))
    return TimelinePage(body, heading(report, view, page, pages, size, total), page, pages)


def heading(report, view, page: int, pages: int, size: int, total: int) -> str:
    """"events 1–1,000 of 675,181 · page 1/676 · lanes: 212 of 164,265 requests · ] next …": the page and the totals."""
    shown = len(view.events)
    first = page * size + 1 if shown else 0
    lanes = len({e.request_id for e in view.events if e.request_id} | {r.id for r in view.requests})
    text = (f"events {first:,}–{first + shown - 1 if shown else 0:,} of {total:,} · page {page + 1:,}/{pages:,} · "
            f"lanes: {lanes:,} of {request_total(report):,} requests")
    if pages > 1:
        text += " · ] next  [ previous  } last  { first"
    return text
