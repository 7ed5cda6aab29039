"""LogEventPager: a runtime log's events, one page at a time, read from its SQLite index (never all in memory)."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from qdebug.render.data_text import data
from qdebug.render.palette import kind_look

PAGE = 200


def page_text(index, flt, page: int, size: int, selected: str | None) -> tuple[Text, int]:
    """One page of events as text lines, and the number of pages."""
    total = index.count_events(flt)
    pages = max(1, -(-total // size))
    page = min(max(0, page), pages - 1)
    first = page * size
    out = Text()
    shown = 0
    for e in index.events(flt, offset=first, limit=size):
        shown += 1
        bad = kind_look(e.kind).alarm
        style = "bold red" if bad else ("bold" if selected is not None and selected in (e.request_id, e.donor) else "dim")
        where = f"line {e.line}" if e.line is not None else f"#{e.seq}"
        detail = ", ".join(p for p in (
            f"offset {e.offset}" if e.offset is not None else "",
            f"{e.tokens} tokens" if e.tokens is not None else "",
            f"donor {e.donor}" if e.donor else "",
        ) if p)
        out.append(data(f"{where:>12}  {e.request_id or '–':<8} {e.kind:<20} {detail}", style))  # a log's ids and kinds: data
        out.append("\n")
    head = Text(f"events {first + 1:,}–{first + shown:,} of {total:,} · page {page + 1:,}/{pages:,} · ] next  [ previous  }} last  {{ first\n",
                style="bold")
    head.append_text(out)
    head.rstrip()
    head.no_wrap, head.overflow = True, "ellipsis"
    return head, pages


class LogEventPager(Widget):
    """Pages through a log's events from `report.log_index`; `page` moves, `selected` highlights a request."""

    page: reactive[int] = reactive(0, layout=True)
    selected: reactive[str | None] = reactive(None)

    def __init__(self, report, size: int = PAGE, **kwargs):
        super().__init__(**kwargs)
        self.report = report
        self.page_size = size
        self.pages = 1

    def render(self):
        """The current page."""
        text, self.pages = page_text(self.report.log_index, self.report.event_filter, self.page, self.page_size, self.selected)
        return text

    def move(self, where: str) -> None:
        """next | previous | first | last."""
        target = {"next": self.page + 1, "previous": self.page - 1, "first": 0, "last": self.pages - 1}[where]
        self.page = min(max(0, target), max(0, self.pages - 1))
