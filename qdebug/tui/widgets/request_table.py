"""RequestTable: one row per request of a replayed burst: verdict, donor, offsets and texts."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import on
from textual.message import Message
from textual.widgets import DataTable

from qdebug.render.data_text import data
from qdebug.render.landed import donor_cell, offset_cells
from qdebug.render.verdict_cell import verdict_text
from qdebug.shown import shown
from qdebug.vocab import Verdict

HEADERS = ("id", "verdict", "donor", "text@", "visual@", "image", "reference", "replayed")
IMAGE, TEXTS = 5, (6, 7)  # the answers share the width the others leave first; the image's file name gets the rest
FLOOR = 12  # the narrowest a cut text column gets (when the table is wider than the screen it scrolls)


def fit_widths(needs: list[int], available: int, floor: int = FLOOR) -> list[int]:
    """Widths for columns that need `needs` within `available`: the short ones whole, the rest share what is left."""
    widths = [0] * len(needs)
    left, open_ = available, sorted(range(len(needs)), key=lambda i: needs[i])
    while open_:
        share = max(floor, left // len(open_))
        i = open_.pop(0)
        widths[i] = min(needs[i], share)
        left -= widths[i]
    return widths


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _cut_text(text: Text, width: int) -> Text:
    """A styled cell cut as `_cut` cuts plain text."""
    if len(text) <= width:
        return text
    cut = text[: width - 1]
    cut.append("…")
    return cut


def _quoted(text: str | None) -> str:
    return "–" if text is None else repr(text)


class RequestTable(DataTable):
    """The burst's requests; Enter posts RequestTable.RequestChosen. Call `show(report)` to fill it."""

    @dataclass
    class RequestChosen(Message):
        """Enter on a request: open it."""

        request_id: str

    def __init__(self, **kwargs):
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self._report = None
        self._widths: list[int] | None = None

    def _cells(self, r) -> list[str]:
        """A request's cells as plain text, before any cut: a report's ids, answers and file names are data, hidden
        characters escaped (the answers are quoted: repr escapes them)."""
        return [shown(r.id, None), verdict_text(r).plain, shown(donor_cell(r) or "–", None), *offset_cells(r),
                shown((r.image or "–").rsplit("/", 1)[-1], None),  # as `qdebug replay`'s table
                _quoted(r.reference), _quoted(r.replayed if r.replayed is not None else r.observed)]

    def _fit(self, report) -> list[int]:
        """Each column's width: whole where the screen allows; the answers share the room first, the image name gets the rest."""
        rows = [self._cells(r) for r in report.requests]
        needs = [max([len(h)] + [len(row[c]) for row in rows]) for c, h in enumerate(HEADERS)]
        width = self.size.width or self.app.size.width
        fixed = sum(n for c, n in enumerate(needs) if c != IMAGE and c not in TEXTS)
        available = width - fixed - 2 * len(HEADERS) - 2  # cell padding, and the scrollbar's room
        texts = fit_widths([needs[c] for c in TEXTS], available - min(needs[IMAGE], FLOOR))
        image = min(needs[IMAGE], max(FLOOR, available - sum(texts)))
        return [*needs[:IMAGE], image, *texts]

    def show(self, report) -> None:
        """Fill from a ReplayReport, each text as wide as it needs (cut only where the screen is too narrow)."""
        current = self.current_id
        self._report, self._widths = report, self._fit(report)
        self.clear(columns=True)
        for header, width in zip(HEADERS, self._widths):
            self.add_column(header, width=width)
        for r in report.requests:
            cells = [_cut(c, w) for c, w in zip(self._cells(r), self._widths)]
            offsets_differ = r.text_offset is not None and r.visual_offset is not None and r.text_offset != r.visual_offset
            self.add_row(
                data(cells[0], "bold", None),  # DataTable reads a str cell holding "[" as markup: every cell is a Text
                _cut_text(verdict_text(r), self._widths[1]),  # `verdict @stage`, as `qdebug replay`'s table
                data(cells[2], "bold red" if r.donor else "dim", None),
                data(cells[3], limit=None),
                data(cells[4], "bold red" if offsets_differ else "", None),
                data(cells[5], limit=None),
                data(cells[6], "dim", None),
                data(cells[7], "bold red" if r.verdict != Verdict.OK else "", None),
                key=r.id,
            )
        if current is not None and current in self.rows:
            self.move_cursor(row=self.get_row_index(current))

    def on_resize(self, event) -> None:
        """A new width: refit the columns (the cursor stays on its request)."""
        if self._report is not None and self._fit(self._report) != self._widths:
            self.show(self._report)

    @property
    def current_id(self) -> str | None:
        """The request id under the cursor."""
        if self.row_count == 0:
            return None
        return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value

    @on(DataTable.RowSelected)
    def _choose_row(self, event: DataTable.RowSelected) -> None:
        """Enter on a row: open that request."""
        event.stop()
        if event.row_key.value is not None:  # every row is keyed by its request id (show)
            self.post_message(self.RequestChosen(event.row_key.value))
