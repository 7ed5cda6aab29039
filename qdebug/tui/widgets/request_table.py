"""RequestTable: one row per request of a replayed burst: verdict, donor, offsets and texts."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import on
from textual.message import Message
from textual.widgets import DataTable

from qdebug.render.palette import verdict_style
from qdebug.vocab import Verdict


def _short(text: str | None, width: int = 31) -> str:
    """Quoted text cut to `width` characters."""
    if text is None:
        return "–"
    shown = repr(text)
    return shown if len(shown) <= width else shown[: width - 1] + "…"


class RequestTable(DataTable):
    """The burst's requests; Enter posts RequestTable.RequestChosen. Call `show(report)` to fill it."""

    @dataclass
    class RequestChosen(Message):
        """Enter on a request: open it."""

        request_id: str

    def __init__(self, **kwargs):
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)

    def show(self, report) -> None:
        """Fill from a ReplayReport."""
        self.clear(columns=True)
        self.add_columns("id", "verdict", "donor", "text@", "visual@", "image", "reference", "replayed")
        for r in report.requests:
            offsets_differ = r.text_offset is not None and r.visual_offset is not None and r.text_offset != r.visual_offset
            self.add_row(
                Text(r.id, style="bold"),
                Text(r.verdict, style=verdict_style(r.verdict)),
                Text(r.donor or "–", style="bold red" if r.donor else "dim"),
                str(r.text_offset) if r.text_offset is not None else "–",
                Text(str(r.visual_offset) if r.visual_offset is not None else "–", style="bold red" if offsets_differ else ""),
                (r.image or "–").rsplit("/", 1)[-1][:22],
                Text(_short(r.reference), style="dim"),
                Text(_short(r.replayed if r.replayed is not None else r.observed), style="bold red" if r.verdict != Verdict.OK else ""),
                key=r.id,
            )

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
        self.post_message(self.RequestChosen(event.row_key.value))
