"""BatchScreen: a replayed burst: requests with verdicts and donors, the aligned event timeline, the contamination matrix."""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from qdebug.errors import describe

from ..commands import CommandError, parse
from ..messages import CommandEntered, FileLoaded, Notice, RequestChosen
from ..state import TraceDoc
from ..widgets.command_bar import CommandBar
from ..widgets.contamination_view import ContaminationView
from ..widgets.event_timeline import EventTimeline
from ..widgets.message_line import MessageLine
from ..widgets.request_table import RequestTable


class BatchScreen(Screen):
    """One replay report; Enter opens the highlighted request on a RequestScreen."""

    BINDINGS = [
        Binding("enter", "open", "open request"),
        Binding("colon", "command", ":cmd"),
        Binding("question_mark", "help", "help"),
        Binding("escape", "back", "back", show=False),
        Binding("q", "quit", "quit"),
        Binding("o", "picture", "offset picture", show=False),
        Binding("right_square_bracket", "page('next')", "next events", show=False),
        Binding("left_square_bracket", "page('previous')", "previous events", show=False),
        Binding("right_curly_bracket", "page('last')", "last events", show=False),
        Binding("left_curly_bracket", "page('first')", "first events", show=False),
    ]

    def __init__(self, report, *, source: str = "", **kwargs):
        super().__init__(**kwargs)
        self.report = report
        self.source = source or report.source

    def compose(self) -> ComposeResult:
        """Title line; requests; timeline | matrix; findings; messages, command bar, keys."""
        yield Static(self._title(), id="info")
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
        """Fill the panels from the report."""
        self.query_one("#requests").border_title = "requests (Enter opens one)"
        self.query_one("#timeline-box").border_title = "events"
        self.query_one("#matrix-box").border_title = "contamination"
        table = self.query_one(RequestTable)
        table.show(self.report)
        events = self.query_one("#events")
        if isinstance(events, EventTimeline):
            events.report = self.report
        self.query_one(ContaminationView).report = self.report
        events.selected = table.current_id
        table.focus()

    def _paged(self) -> bool:
        """A log larger than the events the report holds is paged from its index."""
        index = getattr(self.report, "log_index", None)
        return index is not None and index.count_events(self.report.event_filter) > len(self.report.events)

    def action_picture(self) -> None:
        """The offset timeline as a picture (the PNG `--timeline-png` writes)."""
        from .timeline_picture import TimelinePictureScreen

        self.app.push_screen(TimelinePictureScreen(self.report))

    def action_page(self, where: str) -> None:
        """Next / previous / first / last page of a large log's events."""
        from ..widgets.log_pager import LogEventPager

        for pager in self.query(LogEventPager):
            pager.move(where)

    def _title(self) -> Text:
        r = self.report
        text = Text(f"replay {self.source}", style="bold")
        text.append(f" · {r.kind}" + (f" · mode {r.mode}" if r.mode else "") + (f" · inject {r.inject}" if r.inject else ""), style="dim")
        bad = [o for o in r.requests if o.verdict != "ok"]
        text.append(f" · {len(r.requests)} requests, {len(bad)} not ok", style="bold red" if bad else "green")
        return text

    def _findings(self) -> Text:
        from qdebug.render.findings import findings_text

        return findings_text(self.report.findings, empty="no findings")

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """Highlight the request's lane in the timeline."""
        self.query_one("#events").selected = event.row_key.value

    def on_request_chosen(self, event: RequestChosen) -> None:
        """Open the request's replayed trace (t toggles to its isolated reference)."""
        from .request import RequestScreen

        trace = self.report.traces.get(event.request_id)
        if trace is None:
            self.query_one(MessageLine).say(f"request {event.request_id}: no trace in this report (runtime logs carry no tensors)", error=True)
            return
        ref = self.report.references.get(event.request_id)
        doc = TraceDoc(trace, source=f"replay {self.source}", role="replayed")
        reference = TraceDoc(ref, source=f"reference of {event.request_id}", role="reference") if ref is not None else None
        self.app.push_screen(RequestScreen(doc, reference=reference))

    def on_command_entered(self, event: CommandEntered) -> None:
        """The batch screen knows open, replay, help and quit."""
        say = self.query_one(MessageLine).say
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
            self._load(lambda: load_or_run_replay(cmd.arg), cmd.arg)
        else:
            say(f"{cmd.name} works on the request screen (Enter opens a request)", error=True)

    def _open(self, arg: str) -> None:
        from pathlib import Path

        path = Path(arg).expanduser()
        if path.suffix not in (".qdt", ".qdr") or not path.is_file():
            self.query_one(MessageLine).say(f"open {arg}: expected an existing .qdt trace or .qdr replay report", error=True)
            return
        if path.suffix == ".qdr":
            from qdebug.replay.report import load_report

            self._load(lambda: load_report(path), arg)
        else:
            from qdebug.trace.schema import load_trace

            self._load(lambda: load_trace(path), arg)

    @work(thread=True, group="files")
    def _load(self, load, source: str) -> None:
        try:
            value = load()
        except Exception as exc:
            self.post_message(Notice(describe(exc), error=True))
            return
        self.post_message(FileLoaded("report" if hasattr(value, "requests") else "trace", value, source))

    def on_file_loaded(self, event: FileLoaded) -> None:
        """Show what was opened: another report here, or a trace on a request screen."""
        if event.kind == "report":
            self.app.push_screen(BatchScreen(event.value, source=event.path))
        else:
            from .request import RequestScreen

            self.app.push_screen(RequestScreen(TraceDoc(event.value, source=event.path)))

    def on_notice(self, event: Notice) -> None:
        """A worker's error."""
        self.query_one(MessageLine).say(event.text, event.error)

    def action_command(self) -> None:
        """Focus the command bar."""
        self.query_one(CommandBar).focus()

    def action_open(self) -> None:
        """Open the request under the table's cursor (Enter when the table has the focus does the same)."""
        rid = self.query_one(RequestTable).current_id
        if rid is not None:
            self.post_message(RequestChosen(rid))

    def action_help(self) -> None:
        """Keys and commands."""
        from .help import HelpScreen

        self.app.push_screen(HelpScreen())

    def action_back(self) -> None:
        """Back to the screen below, if any."""
        if len(self.app.screen_stack) > 1:
            self.app.pop_screen()

    def action_quit(self) -> None:
        """Leave qdebug."""
        self.app.quit_app()
