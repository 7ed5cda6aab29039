"""RequestScreen: one request's stages, their detail, the offset timeline, attention heatmap and top-k.

The screen holds what is on screen (document, selection) and pushes it down to the widgets; it composes the
controllers that do the work (tui/controllers/: RunController live runs, CommandController command-bar verbs,
ReplayController `replay FILE`, DocController the document and the runs `t` cycles, Cursor the keys' moves,
Prefetcher), its panels (tui/request_panels.py) and its keys (tui/request_keys.py). Widgets and workers report back
with messages, handled here with @on and handed to the controller they concern.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Static

from qdebug.vocab import StageName

from ..controllers.command import CommandController
from ..controllers.cursor import Cursor
from ..controllers.documents import DocController
from ..controllers.prefetch import Prefetcher
from ..controllers.replay import ReplayController
from ..controllers.run import RunController
from ..info_line import info_text
from ..replay_job import ReplayJob
from ..request_keys import RequestKeys
from ..request_panels import RequestPanels
from ..session import PendingRequest, RunSession
from ..state import Selection, TraceDoc, View, listed_stages, stage_changes
from ..widgets.command_bar import CommandBar
from ..widgets.message_line import MessageLine
from ..widgets.model_status import ModelStatus
from ..widgets.stage_detail import StageDetail
from ..widgets.stage_list import StageList

if TYPE_CHECKING:
    from ..routing import FileRouter


class RequestScreen(RequestKeys):
    """Step through one request (live run or saved trace) and look at every stage."""

    def __init__(self, doc: TraceDoc | None = None, *, files: FileRouter, others: tuple[TraceDoc, ...] = (), live: bool = False,
                 pending: PendingRequest | None = None, **kwargs):
        super().__init__(**kwargs)
        self.doc = doc
        self.live = live  # a model is (being) loaded: this screen can run requests
        self.pending = pending or PendingRequest()
        self.sel = Selection()
        self.breakpoints: set[str] = {StageName.PREPROCESS} if live else set()  # a live run stops before it starts
        self.panels = RequestPanels(self, self.refresh_view)
        # one request's runs in the order `t` cycles them (replayed, reference; an endpoint's burst, alone, local model)
        self.documents = DocController(self, [doc, *others] if doc is not None and others else [])
        self.runs = RunController(self, live=live, pending=self.pending, breakpoints=self.breakpoints)
        self.replays = ReplayController(self, self.panels, files.show_report)
        self.commands = CommandController(self, self.runs, self.replays, files, self.panels.screenshot)
        self.cursor = Cursor(self, self.panels.stage_rows, self.panels.views)
        self.prefetcher = Prefetcher(self, self.cursor.neighbour_views)
        self._ready = False  # widgets composed and mounted

    # layout ------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        """Info line; stages | detail (+ top-k, timeline, heatmap: `RequestPanels.mount`); model status, messages, command bar."""
        yield Static(id="info")
        with Horizontal(id="main"):
            yield StageList(id="stages")
            with Vertical(id="right"):
                with Horizontal(id="upper"):
                    yield StageDetail(id="detail")
        spec = self.app.model_spec  # build_app names one whenever the screen is live
        if self.live and spec is not None:
            yield ModelStatus(f"loading model {spec.model} on {spec.device}…", id="model-status")
        yield MessageLine(id="message")
        yield CommandBar(self.stage_names, id="command")

    def first_frame_shown(self) -> None:
        """The app's first frame is on screen: now the other panels."""
        self.call_later(self.panels.mount, self.app.pixels)

    def on_mount(self) -> None:
        """Draw the first frame at once (the model, if any, is still loading); the other panels follow it."""
        self.query_one("#detail").border_title = "stage"
        self.query_one("#stages").border_title = "stages"
        if getattr(self.app, "first_frame_at", 0) is not None:  # else the app calls first_frame_shown on Ready
            self.call_after_refresh(self.panels.mount, self.app.pixels)
        if self.doc is not None:
            self.sel = replace(self.sel, stage=self.doc.trace.stage_names[0] if self.doc.trace.stages else None)
        elif self.live and not self.pending.empty:
            self.runs.run_when_loaded = True
            self.say(f"request ready: {self.pending.describe()}; it runs when the model is loaded (keys you press now act then)")
        elif self.live:
            self.say("`image PATH`, `prompt TEXT`, then `run` (: focuses the command bar)")
        if self.doc is not None:
            self.say("↑/↓ stages · ←/→ query token · [ ] layer · h head · : command · ? help")
        if self.app.keymap_error:
            self.say(self.app.keymap_error, error=True)
        elif self.app.user_keymap:
            self.say(f"keys from {self.app.keymap_path}: " + ", ".join(f"{a} = {k}" for a, k in self.app.user_keymap.items()))
        self._ready = True
        self.refresh_view()
        # the stage list has the keys from the start: it is the screen's first focusable widget (AUTO_FOCUS, at
        # screen resume); focusing it here as well re-styled it once more before the first frame (~1 ms)
        if self.runs.loaded is not None or self.runs.model_error is not None:  # the loader finished before the first frame
            self._model_settled()

    # the app and the tests talk to the screen ------------------------------------------
    def model_ready(self, loaded) -> None:
        """The app's loader finished: stages of this model, and the pre-filled request runs."""
        self.runs.loaded = loaded
        self._model_settled()

    def model_failed(self, error: str) -> None:
        """The model could not be loaded: say so, keep the UI (open still works)."""
        self.runs.model_error = error
        self._model_settled()

    def _model_settled(self) -> None:
        if self._ready:  # else on_mount does it: the loader finished before the first frame
            self.query_one(ModelStatus).done()
            self.runs.model_settled()

    def run_command(self, line: str) -> None:
        """Run a command-bar line (the palette and the run controller call this too)."""
        self.commands.run(line)

    def cancel_all(self, timeout: float = 5.0) -> None:
        """Cancel every run (and a replay) this screen started and wait for their threads (on quit)."""
        self.replays.stop()
        self.runs.cancel_all(timeout)

    def on_unmount(self) -> None:
        """However the app ends, no stepper thread is left blocked at a breakpoint."""
        self.cancel_all(timeout=2.0)

    # what is on screen ----------------------------------------------------------------
    @property
    def num_layers(self) -> int | None:
        """Decoder layers of the model or trace on screen."""
        loaded = self.runs.loaded
        if self.doc is not None:
            return self.doc.trace.meta.num_layers or self.doc.trace.num_layers
        if loaded is not None:
            return len(loaded.adapter.decoder_layers(loaded.model))
        return None

    @property
    def num_heads(self) -> int | None:
        """Attention heads per layer."""
        loaded = self.runs.loaded
        if self.doc is not None:
            return self.doc.trace.meta.num_heads
        if loaded is not None:
            return int(loaded.adapter.text_config(loaded.config).num_attention_heads)
        return None

    def stage_names(self) -> list[str]:
        """The stages listed: the trace's, or the pipeline so far for a live run."""
        request = self.runs.request
        return listed_stages(self.doc.trace if self.doc else None, self.runs.state(), self.num_layers, request.max_new_tokens if request else None)

    def view(self) -> View:
        """The View the panels draw."""
        rows = {r.name: r for r in self.runs.rows(self.stage_names(), self.doc)}
        status = rows[self.sel.stage].status if self.sel.stage in rows else "done"
        return View(self.doc, self.sel, status, self.runs.line())

    def refresh_view(self) -> None:
        """Push the current state down to every widget."""
        rows = tuple(self.runs.rows(self.stage_names(), self.doc))
        stage_list = self.query_one(StageList)
        stage_list.rows = rows
        if self.sel.stage is None and rows:
            self.sel = replace(self.sel, stage=rows[0].name)
        if self.sel.stage is not None:
            stage_list.select(self.sel.stage)
        spec = self.app.model_spec
        info = info_text(self.doc, self.documents.paired, self.runs, spec.model if self.live and spec is not None else None)
        self.panels.show(self.view(), info, self.app.pixels)
        if self.doc is not None and self.doc.complete:
            self.prefetcher.schedule()

    def say(self, text: str, error: bool = False) -> None:
        """Show a line in the message bar."""
        self.query_one(MessageLine).say(text, error)

    def last_said(self) -> str:
        """The line the message bar shows now."""
        return self.query_one(MessageLine).message[0]

    # changing what is on screen -----------------------------------------------------------
    def select(self, **changes) -> None:
        """Change the selection and redraw."""
        self.sel = replace(self.sel, **changes)
        self.refresh_view()

    def select_stage(self, stage: str) -> None:
        """Select `stage` (and the layer or query it implies), redrawing only when that changes something."""
        changes = stage_changes(stage, self.doc)
        if replace(self.sel, **changes) != self.sel:
            self.select(**changes)

    def show_opened(self, trace, source: str) -> None:
        """A trace opened with `open`: it replaces the run or document on screen."""
        self.runs.stop()
        self.documents.open(trace, source)

    def clear_for_run(self) -> None:
        """A new run starts: no document on screen, the cursor back at preprocess."""
        self.documents.clear()

    # messages up ------------------------------------------------------------------------
    @on(StageList.StageHighlighted)
    def _follow_stage_cursor(self, event: StageList.StageHighlighted) -> None:
        """Follow the stage cursor: layer.N picks the heatmap layer, step.K the query that chose it."""
        if event.stage == self.query_one(StageList).current:  # drop stale events from programmatic moves
            self.select_stage(event.stage)

    @on(CommandBar.Entered)
    def _run_entered(self, event: CommandBar.Entered) -> None:
        """Run a command from the bar."""
        self.run_command(event.line)

    @on(RunSession.Event)
    def _follow_run(self, event: RunSession.Event) -> None:
        """The live run paused, reached a stage or ended."""
        self.runs.follow(event)

    @on(ReplayJob.Progress)
    @on(ReplayJob.Ended)
    def _follow_replay(self, event: ReplayJob.Progress | ReplayJob.Ended) -> None:
        """A replay moved on, or ended (its report, cancelled, or failed)."""
        self.replays.follow(event)
