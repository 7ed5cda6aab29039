"""BatchScreen: a replayed burst: requests with verdicts and donors, the aligned event timeline, the contamination matrix."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from qdebug.analysis.matrix_words import matrix_words
from qdebug.render.data_text import data

from ..command_language import CommandError, parse
from ..page_keys import PAGE_BINDINGS
from ..report_totals import Totals, count_totals, findings_heading, is_indexed, requests_heading
from ..widgets.command_bar import CommandBar
from ..widgets.contamination_view import ContaminationView
from ..widgets.event_timeline import EventTimeline
from ..widgets.message_line import MessageLine
from ..widgets.request_table import RequestTable

if TYPE_CHECKING:
    from textual import getters

    from ..app_type import QDebugAppType
    from ..routing import FileRouter
    from ..widgets.log_pager import LogEventPager


class BatchScreen(Screen):
    """One replay report; Enter opens the highlighted request on a request screen (through the app's file router)."""

    if TYPE_CHECKING:  # qdebug's app (tui/app_type.py)
        app = getters.app(QDebugAppType)

    BINDINGS = [
        Binding("enter", "open", "open request"),
        Binding("colon", "command", ":cmd"),
        Binding("question_mark", "help", "help"),
        Binding("escape", "back", "back", show=False),
        Binding("q", "quit", "quit"),
        Binding("o", "picture", "offset picture", show=False),
        *PAGE_BINDINGS,
    ]

    @dataclass
    class Counted(Message):
        """The true totals of the report's source (a large log's, counted from its index in a worker)."""

        totals: Totals

    def __init__(self, report, *, files: FileRouter, source: str = "", **kwargs):
        super().__init__(**kwargs)
        self.report = report
        self.files = files
        self.source = source or report.source
        # a report without an index holds everything: its totals are its lists; a log's are counted in a worker
        self.totals: Totals | None = None if is_indexed(report) else count_totals(report)

    def compose(self) -> ComposeResult:
        """Title line; requests; timeline | matrix; findings; messages, command bar, keys."""
        yield Static(self._title(), id="info")
        from qdebug.render.cache_cells import cache_lines

        caches = cache_lines(self.report)  # an endpoint report: what each phase did about the engine's caches, as the CLI says
        if caches:
            yield Static(Text("\n").join(data(line, "dim") for line in caches), id="caches")
        yield RequestTable(id="requests")
        with Horizontal(id="batch-lower"):
            with VerticalScroll(id="timeline-box"):
                if self._paged():
                    from ..widgets.log_pager import LogEventPager

                    yield LogEventPager(self.report, id="events")
                else:
                    yield EventTimeline(id="events")
            with Vertical(id="matrix-box"):
                yield ContaminationView(id="matrix")
                yield Static(self._findings(), id="findings")
        yield MessageLine(id="message")
        yield CommandBar(lambda: [], id="command")
        yield Footer()

    def on_mount(self) -> None:
        """Fill the panels from the report (nothing when the screen was closed before it mounted: Esc pressed at once)."""
        if not self.is_attached or not self.query("#timeline-box"):
            return
        self.query_one("#timeline-box").border_title = "events"
        self._show_totals()
        if self.totals is None:
            self._count()
        table = self.query_one(RequestTable)
        table.show(self.report)
        events = self._events()
        if isinstance(events, EventTimeline):
            events.report = self.report
        self.query_one(ContaminationView).report = self.report
        events.selected = table.current_id
        table.focus()

    @work(thread=True, exclusive=True, group="totals")
    def _count(self) -> None:
        """Count the log's requests, verdicts and findings from its index (a query over every request)."""
        self.post_message(self.Counted(count_totals(self.report)))

    @on(Counted)
    def _counted(self, event: Counted) -> None:
        self.totals = event.totals
        self._show_totals()

    def _show_totals(self) -> None:
        """Headers with the true totals, saying where a panel shows a page of them (until counted: what is shown)."""
        t = self.totals
        self.query_one("#info", Static).update(self._title())
        shown = len(self.report.requests)
        self.query_one("#requests").border_title = data(requests_heading(t) if t is not None else
                                                        f"requests 1–{shown:,} of … (counting the log) · Enter opens one")
        box = self.query_one("#matrix-box")
        box.border_title = data(matrix_words(self.report).heading)  # an endpoint's matrix is of answers
        if t is not None and t.requests_paged and t.contaminated:
            box.border_title = f"contamination: {t.contaminated:,} contaminated requests in the log"
        self.query_one("#findings", Static).update(self._findings())

    def _paged(self) -> bool:
        """A log larger than the events the report holds is paged from its index."""
        index = getattr(self.report, "log_index", None)
        return index is not None and index.count_events(self.report.event_filter) > len(self.report.events)

    def action_picture(self) -> None:
        """The offset timeline as a picture (the PNG `--timeline-png` writes)."""
        self.app.show_picture(self.report)

    def action_page(self, where: str) -> None:
        """Next / previous / first / last page of a large log's events."""
        from ..widgets.log_pager import LogEventPager

        for pager in self.query(LogEventPager):
            pager.move(where)

    def _title(self) -> Text:
        r = self.report
        text = data(f"replay {self.source}", "bold")  # a file's name, a .qdr's fields: data
        text.append(data(f" · {r.kind}" + (f" · mode {r.mode}" if r.mode else "") + (f" · inject {r.inject}" if r.inject else ""), "dim"))
        t = self.totals
        if t is None:  # a large log, still being counted: say what the table shows, never as the total
            text.append(f" · {len(r.requests):,} requests shown, counting the log's…", style="dim")
            return text
        text.append(f" · {t.requests:,} requests, {t.not_ok:,} not ok", style="bold red" if t.not_ok else "green")
        if t.requests_paged:
            text.append(f" (table: the {t.shown_requests:,} worst)", style="dim")
        return text

    def _findings(self) -> Text:
        from qdebug.render.findings import findings_text

        text = findings_text(self.report.findings, empty="no findings")
        heading = findings_heading(self.totals) if self.totals is not None else ""
        if heading:
            text = data(heading + "\n", "dim", newlines=True).append_text(text)
        return text

    def say(self, text: str, error: bool = False) -> None:
        """Show a line in the message bar."""
        self.query_one(MessageLine).say(text, error)

    def _events(self) -> EventTimeline | LogEventPager:
        """The events panel: the burst's timeline, or an indexed log's pager (compose puts one of them there)."""
        return cast("EventTimeline | LogEventPager", self.query_one("#events"))

    @on(DataTable.RowHighlighted)
    def _follow_row(self, event: DataTable.RowHighlighted) -> None:
        """Highlight the request's lane in the timeline."""
        self._events().selected = event.row_key.value

    @on(RequestTable.RequestChosen)
    def _open_request(self, event: RequestTable.RequestChosen) -> None:
        """Open the request's replayed trace (t cycles its other runs: the reference; an endpoint's engine alone and local model)."""
        from ..request_runs import no_runs_said, request_runs

        docs = request_runs(self.report, event.request_id, self.source)
        if not docs:
            self.say(no_runs_said(self.report, event.request_id), error=True)
            return
        self.files.show_request(*docs)

    @on(CommandBar.Entered)
    def _run_entered(self, event: CommandBar.Entered) -> None:
        """The batch screen knows open, replay, help and quit."""
        say = self.say
        try:
            cmd = parse(event.line)
        except CommandError as exc:
            say(str(exc), error=True)
            return
        if cmd.name == "quit":
            self.app.quit_app()
        elif cmd.name == "help":
            self.action_help()
        elif cmd.name == "open":
            self._open(cmd.arg)
        elif cmd.name == "replay":
            try:
                from qdebug.commands.replay import load_or_run_replay
            except ImportError:
                say("replay is unavailable in this build (qdebug.commands.replay is missing)", error=True)
                return
            self.files.load(self, cmd.arg, lambda: load_or_run_replay(cmd.arg))
        else:
            say(f"{cmd.name} works on the request screen (Enter opens a request)", error=True)

    def _open(self, arg: str) -> None:
        path = Path(arg).expanduser()
        if path.suffix not in (".qdt", ".qdr") or not path.is_file():
            self.say(f"open {arg}: expected an existing .qdt trace or .qdr replay report", error=True)
            return
        self.files.open(self, path, arg)

    def action_command(self) -> None:
        """Focus the command bar."""
        self.query_one(CommandBar).focus()

    def action_open(self) -> None:
        """Open the request under the table's cursor (Enter when the table has the focus does the same)."""
        rid = self.query_one(RequestTable).current_id
        if rid is not None:
            self.post_message(RequestTable.RequestChosen(rid))

    def action_help(self) -> None:
        """Keys and commands."""
        self.app.show_help()

    def action_back(self) -> None:
        """Back to the screen below, if any."""
        if len(self.app.screen_stack) > 1:
            self.app.pop_screen()

    def action_quit(self) -> None:
        """Leave qdebug."""
        self.app.quit_app()
