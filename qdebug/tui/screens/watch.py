"""WatchScreen: `qdebug watch`'s live view. Reads the source (a server's /metrics, a watch folder) every interval in a
worker; the totals, a table of checks (totals, checks/s and violations/s over the readings held, a sparkline of
violations per reading) and the latest findings (the whole finding on the message line as the cursor reaches it);
Enter on a finding with a recorded trace opens it in the request screen (through the app's file router)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from ..widgets.message_line import MessageLine
from ..widgets.watch_views import check_rows, finding_row, finding_said, fit_rows, totals_line

if TYPE_CHECKING:
    from rich.text import Text

    from qdebug.commands.watch import WatchSnapshot

HISTORY = 120  # readings kept (memory is bounded whatever the run's length)


class WatchScreen(Screen):
    """The live view of one watch source."""

    BINDINGS = [Binding("q", "app.quit", "quit"), Binding("r", "read", "read now")]

    @dataclass
    class Read(Message):
        """A reading of the source arrived (a WatchSnapshot), or the one-line reason it failed."""

        snapshot: WatchSnapshot | None
        error: str = ""

    def __init__(self, args, interval: float, files) -> None:
        super().__init__()
        self.args, self.interval, self.files = args, interval, files
        self.history: deque = deque(maxlen=HISTORY)
        self.shown: list = []  # the findings in the table, in row order

    def compose(self) -> ComposeResult:
        from qdebug.render.data_text import data

        yield Static(data(f"qdebug watch {self.args.source}"), id="watch-title")
        yield Static("", id="watch-totals")
        table: DataTable[Text] = DataTable(id="watch-checks", cursor_type="none")
        table.add_columns("check", "checks", "violations", "errors", "checks/s", "violations/s", "seconds", "violations over time")
        yield table
        found: DataTable[Text] = DataTable(id="watch-findings", cursor_type="row")
        found.add_columns("time", "check", "outcome", "request", "stage", "donors / co-batched", "trace")
        yield found
        yield MessageLine()
        yield Footer()

    def on_mount(self) -> None:
        self.action_read()
        self.set_interval(self.interval, self.action_read)
        self.query_one("#watch-findings", DataTable).focus()

    def say(self, text: str, error: bool = False) -> None:
        """Show a line in the message bar."""
        self.query_one(MessageLine).say(text, error)

    def action_read(self) -> None:
        """Read the source now (in a worker)."""
        self._read()

    @work(thread=True, exclusive=True, group="watch-read")
    def _read(self) -> None:
        from qdebug.commands.watch import read_snapshot
        from qdebug.errors import describe

        try:
            self.post_message(self.Read(read_snapshot(self.args)))
        except Exception as exc:  # a server that went away is said on the message line; the view keeps reading
            self.post_message(self.Read(None, describe(exc)))

    @on(Read)
    def _show(self, event: Read) -> None:
        from qdebug.render.data_text import data

        if event.snapshot is None:
            self.say(event.error, error=True)
            return
        self.history.append(event.snapshot)
        checks = self.query_one("#watch-checks", DataTable)
        checks.clear()
        for row in check_rows(list(self.history)):
            checks.add_row(*(data(cell) for cell in row))  # names from the server: data, never markup
        found = self.query_one("#watch-findings", DataTable)
        latest = list(reversed(event.snapshot.findings))  # newest first
        if [(f.time, f.request_id, f.check) for f in latest] != [(f.time, f.request_id, f.check) for f in self.shown]:
            found.clear()
            for row in fit_rows([finding_row(f) for f in latest], found.size.width or self.app.size.width):
                found.add_row(*(data(cell) for cell in row))
            self.shown = latest
        snap = event.snapshot
        share = snap.plugin_share
        cost = f"; the watch costs the worker's steps {share * 100:.1f}%" if share is not None else ""
        counted = "" if snap.counters_read else " (no counter files: counted from the findings log)"
        status = f"{snap.violations} violation(s){counted}; {snap.findings_total} finding(s) logged{cost}"
        self.query_one("#watch-totals", Static).update(data(f"{totals_line(list(self.history))} · {status}"))
        if self.shown:  # the message line holds the finding under the cursor, whole (every donor, why no trace)
            self.say(finding_said(self.shown[min(found.cursor_row, len(self.shown) - 1)]))
        else:
            self.say(status)

    @on(DataTable.RowHighlighted, "#watch-findings")
    def _said(self, event: DataTable.RowHighlighted) -> None:
        """The whole finding (every donor, the trace or why none, the evidence) on the message line."""
        if 0 <= event.cursor_row < len(self.shown):
            self.say(finding_said(self.shown[event.cursor_row]))

    @on(DataTable.RowSelected, "#watch-findings")
    def _open(self, event: DataTable.RowSelected) -> None:
        """Enter: open the finding's recorded trace in the request screen."""
        if event.cursor_row >= len(self.shown):
            return
        from qdebug.commands.watch import trace_file
        from qdebug.errors import describe

        finding = self.shown[event.cursor_row]
        if not finding.trace:
            self.say(f"no trace was recorded for {finding.request_id} (the flight recorder keeps a bounded number)", error=True)
            return
        try:  # where the recorder wrote it: traces/NAME.qdt inside the watch folder (or an absolute trace folder)
            path = trace_file(self.args, finding.trace)
        except Exception as exc:
            self.say(describe(exc), error=True)
            return
        self.files.open(self, Path(path), path)
