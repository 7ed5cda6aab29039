"""RequestScreen: one request's stages, their detail, the offset timeline, attention heatmap and top-k.

The screen holds what is on screen (document, selection) and pushes it down to the widgets; three controllers
do the work: RunController (live runs), CommandController (command-bar verbs), ReplayController (`replay FILE`).
Widgets and workers report back with messages, handled here with @on and handed to the controller they concern.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Static

from qdebug.vocab import StageName, step_stage

from ..controllers.command import CommandController
from ..controllers.prefetch import Prefetcher
from ..controllers.replay import ReplayController
from ..controllers.run import RunController
from ..images import image_dirs_for
from ..info_line import info_text
from ..replay_job import ReplayJob
from ..session import PendingRequest, RunSession
from ..state import Selection, TraceDoc, View, listed_stages, query_move, stage_changes, stage_rows
from ..widgets.command_bar import CommandBar
from ..widgets.message_line import MessageLine
from ..widgets.model_status import ModelStatus
from ..widgets.stage_detail import StageDetail
from ..widgets.stage_list import StageList
from ..widgets.view_panel import ViewPanel

if TYPE_CHECKING:
    from textual import getters

    from ..app_type import QDebugAppType
    from ..routing import FileRouter


class RequestScreen(Screen):
    """Step through one request (live run or saved trace) and look at every stage."""

    if TYPE_CHECKING:  # qdebug's app (tui/app_type.py)
        app = getters.app(QDebugAppType)

    BINDINGS = [
        Binding("down", "stage(1)", "next stage in the list", show=False, id="stage-down"),
        Binding("up", "stage(-1)", "previous stage in the list", show=False, id="stage-up"),
        Binding("n", "next", "next stage", id="next"),
        Binding("c", "continue", "continue", id="continue"),
        Binding("b", "breakpoint", "breakpoint", id="breakpoint"),
        Binding("g", "generate", "+1 token", id="generate"),
        Binding("r", "rerun", "rerun", id="rerun"),
        Binding("left_square_bracket", "layer(-1)", "layer-", id="layer-prev"),
        Binding("right_square_bracket", "layer(1)", "layer+", id="layer-next"),
        Binding("h", "head", "head", id="head"),
        Binding("left", "query(-1)", "query ←", show=False, id="query-prev"),
        Binding("right", "query(1)", "query →", show=False, id="query-next"),
        Binding("shift+left", "token(-1)", "token ←", show=False, id="token-prev"),
        Binding("shift+right", "token(1)", "token →", show=False, id="token-next"),
        Binding("i", "image", "next image", show=False, id="image"),
        Binding("shift+down", "detail(3)", "scroll detail", show=False, id="detail-down"),
        Binding("shift+up", "detail(-3)", "scroll detail", show=False, id="detail-up"),
        Binding("t", "toggle_reference", "replayed/reference", id="reference"),
        Binding("colon", "command", ":cmd", id="command"),
        Binding("question_mark,f1", "help", "help", id="help"),
        Binding("escape", "back", "back", show=False, id="back"),
        Binding("q", "quit", "quit", id="quit"),
    ]

    def __init__(self, doc: TraceDoc | None = None, *, files: FileRouter, others: tuple[TraceDoc, ...] = (), live: bool = False,
                 pending: PendingRequest | None = None, **kwargs):
        super().__init__(**kwargs)
        self.doc = doc
        # one request's runs in the order `t` cycles them (replayed, reference; an endpoint's burst, alone, local model)
        runs = [doc, *others] if doc is not None and others else []
        for d in runs:
            d.others = [o for o in runs if o is not d]
        self.docs: list[TraceDoc] | None = runs or None
        self.live = live  # a model is (being) loaded: this screen can run requests
        self.pending = pending or PendingRequest()
        self.sel = Selection()
        self.breakpoints: set[str] = {StageName.PREPROCESS} if live else set()  # a live run stops before it starts
        self.runs = RunController(self, live=live, pending=self.pending, breakpoints=self.breakpoints)
        self.replays = ReplayController(self, files.show_report)
        self.commands = CommandController(self, self.runs, self.replays, files)
        self.prefetcher = Prefetcher(self)
        self._pixels_key: tuple | None = None
        self._ready = False  # widgets composed and mounted
        self._panels: bool | None = False  # top-k, offsets, heatmap and footer mounted (None: mounting; after the first frame)
        self._info_plain: str | None = None

    # layout ------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        """Info line; stages | detail (+ top-k, timeline, heatmap: `_mount_panels`); model status, messages, command bar."""
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

    async def _mount_panels(self) -> None:
        """Top-k, offsets, the heatmap and the key footer, mounted right after the first frame (laying out and
        drawing them before it cost ~20 ms of it: benchmarks/tui.py); then the current view is pushed to them.
        Keys pressed meanwhile reach the stage list, which is there from the start."""
        if self._panels is not False:
            return
        self._panels = None  # mounting
        from textual.widgets import Footer

        # imported here: the first frame does not wait for modules it does not draw (benchmarks/tui.py)
        from ..widgets.attention_view import AttentionView
        from ..widgets.offset_strip import OffsetTimeline
        from ..widgets.topk_panel import TopKPanel

        topk, timeline, attention = TopKPanel(id="topk"), OffsetTimeline(id="timeline"), AttentionView(id="attention")
        topk.border_title, timeline.border_title, attention.border_title = "top-k", "offsets", "attention"
        right = self.query_one("#right")
        mounts = [self.query_one("#upper").mount(topk), right.mount(timeline)]
        if self.app.pixels:  # the image with its attention overlay, in real pixels
            from ..pixels import image_widget

            attention.pixels = True
            mounts.append(right.mount(Horizontal(attention, image_widget(self.app.pixels, id="pixels"), id="attention-row")))
        else:
            mounts.append(right.mount(attention))
        if not self.query("#replay-status"):  # hidden until a replay runs
            mounts.append(self.mount(self._new_replay_status(), before="#message"))
        mounts.append(self.mount(Footer()))
        for mounted in mounts:
            await mounted
        for status in self.query(ModelStatus):
            status.add_bar()
        self._panels = True
        self.refresh_view()

    def first_frame_shown(self) -> None:
        """The app's first frame is on screen: now the other panels."""
        self.call_later(self._mount_panels)

    def on_mount(self) -> None:
        """Draw the first frame at once (the model, if any, is still loading); the other panels follow it."""
        self.query_one("#detail").border_title = "stage"
        self.query_one("#stages").border_title = "stages"
        if getattr(self.app, "first_frame_at", 0) is not None:  # else the app calls first_frame_shown on Ready
            self.call_after_refresh(self._mount_panels)
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
        rows = {r.name: r for r in self._rows()}
        status = rows[self.sel.stage].status if self.sel.stage in rows else "done"
        return View(self.doc, self.sel, status, self.runs.line())

    def _rows(self):
        return stage_rows(self.stage_names(), self.doc.trace if self.doc else None, self.runs.state(), self.breakpoints)

    def refresh_view(self) -> None:
        """Push the current state down to every widget."""
        rows = tuple(self._rows())
        stage_list = self.query_one(StageList)
        stage_list.rows = rows
        if self.sel.stage is None and rows:
            self.sel = replace(self.sel, stage=rows[0].name)
        if self.sel.stage is not None:
            stage_list.select(self.sel.stage)
        view = self.view()
        for panel in self.query(ViewPanel):  # every panel on the screen, whichever the layout composed
            panel.view = view
        if self.app.pixels and self._panels is True:
            self._show_pixels(view)
        spec = self.app.model_spec
        info = info_text(self.doc, self.docs is not None, self.runs, spec.model if self.live and spec is not None else None)
        if info.plain != self._info_plain:  # an unchanged line must not cost a layout pass
            self._info_plain = info.plain
            self.query_one("#info", Static).update(info)
        if self.doc is not None and self.doc.complete:
            self.prefetcher.schedule()

    def _show_pixels(self, view: View) -> None:
        """Give the pixel widget the image with the selection's attention over it (when that changed)."""
        from ..widgets.attention_view import overlay_for

        key = self.query_one("#attention", ViewPanel).view_key(view)
        if key != self._pixels_key:
            self._pixels_key = key
            widget: Any = self.query_one("#pixels")  # a textual-image widget (the package has no type information)
            image = overlay_for(view)
            widget.image = image
            widget.display = image is not None

    def say(self, text: str, error: bool = False) -> None:
        """Show a line in the message bar."""
        self.query_one(MessageLine).say(text, error)

    def last_said(self) -> str:
        """The line the message bar shows now."""
        return self.query_one(MessageLine).message[0]

    def screenshot(self) -> str:
        """The screen exactly as it is now, as SVG (Textual's screenshot), titled with the info line."""
        return self.app.export_screenshot(title=f"qdebug · {self._info_plain or 'request'}")

    def show_replay_status(self, line: str, done: int | None = None, total: int | None = None) -> None:
        """A replay's progress under the panels."""
        from ..widgets.replay_status import ReplayStatus

        found = self.query("#replay-status")
        if found:
            found.first(ReplayStatus).show(line, done, total)
        else:  # a replay started before the panels mounted
            status = self._new_replay_status()
            self.mount(status, before="#message")
            status.call_after_refresh(status.show, line, done, total)

    def hide_replay_status(self) -> None:
        """The replay ended."""
        from ..widgets.replay_status import ReplayStatus

        for status in self.query("#replay-status").results(ReplayStatus):
            status.hide()

    @staticmethod
    def _new_replay_status():
        from ..widgets.replay_status import ReplayStatus

        return ReplayStatus(id="replay-status")

    def quit(self) -> None:
        """Leave qdebug (the app cancels every run first)."""
        self.app.quit_app()

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
    def _replay_progress(self, event: ReplayJob.Progress) -> None:
        """A replay moved on."""
        self.replays.progress(event)

    @on(ReplayJob.Ended)
    def _replay_ended(self, event: ReplayJob.Ended) -> None:
        """A replay ended (its report, cancelled, or failed)."""
        self.replays.ended(event)

    # changing what is on screen -----------------------------------------------------------
    def select_stage(self, stage: str) -> None:
        """Select `stage` (and the layer or query it implies), redrawing only when that changes something."""
        changes = stage_changes(stage, self.doc)
        if replace(self.sel, **changes) != self.sel:
            self.select(**changes)

    def neighbour_views(self) -> list[tuple[ViewPanel, View]]:
        """Each panel with the view of the stage after, then before, the selected one (for the prefetcher)."""
        rows = self.query_one(StageList).rows
        names = [r.name for r in rows]
        if self.doc is None or self.sel.stage not in names:
            return []
        i = names.index(self.sel.stage)
        panels = list(self.query(ViewPanel))
        jobs: list[tuple[ViewPanel, View]] = []
        for j in (i + 1, i - 1):  # ↓ is the usual direction: first
            if 0 <= j < len(names):
                view = View(self.doc, replace(self.sel, **stage_changes(names[j], self.doc)), rows[j].status, self.runs.line())
                jobs.extend((panel, view) for panel in panels)
        return jobs

    def select(self, **changes) -> None:
        """Change the selection and redraw."""
        self.sel = replace(self.sel, **changes)
        self.refresh_view()

    def clear_for_run(self) -> None:
        """A new run starts: no document on screen, the cursor back at preprocess."""
        self.doc = None
        self.docs = None
        self.sel = replace(self.sel, stage=StageName.PREPROCESS, pos=None)

    def show_opened(self, trace, source: str) -> None:
        """A trace opened with `open`: it replaces the run or document on screen."""
        self.runs.stop()
        self.docs = None
        # a new trace starts a new view at its first generated token: the old cursor may sit on an image token or
        # a layer this trace never captured; only the top-k depth is a preference that carries over
        doc = TraceDoc(trace, source=source, image_dirs=image_dirs_for(source))
        first = step_stage(0) if trace.steps else (trace.stage_names[0] if trace.stages else None)
        self.sel = Selection(topk=self.sel.topk, **(stage_changes(first, doc) if first else {}))
        self.show_doc(doc)
        self.say(f"opened {source}")

    def show_doc(self, doc: TraceDoc) -> None:
        """Put a document on screen, keeping the selection where it still makes sense."""
        self.doc = doc
        self.sel = self.sel.kept_for(doc, self.stage_names(), self.num_layers)
        self.refresh_view()

    # keys ----------------------------------------------------------------------------------
    def action_stage(self, delta: int) -> None:
        """Move the stage cursor and redraw the panels in the same handler (one frame per key)."""
        names = [r.name for r in self.query_one(StageList).rows]
        if not names:
            return
        index = names.index(self.sel.stage) + delta if self.sel.stage in names else 0
        self.select_stage(names[max(0, min(len(names) - 1, index))])

    def action_layer(self, delta: int) -> None:
        """Heatmap layer: mean → 0 → … → N-1 (and back)."""
        cycle = [None, *range(self.num_layers or 0)]
        self.select(layer=cycle[(cycle.index(self.sel.layer) + delta) % len(cycle)])

    def action_head(self) -> None:
        """Heatmap head: mean → 0 → 1 … → mean."""
        cycle = [None, *range(self.num_heads or 0)]
        self.select(head=cycle[(cycle.index(self.sel.head) + 1) % len(cycle)])

    def action_query(self, delta: int) -> None:
        """Move the query token (text prompt tokens, then one per generated step)."""
        if self.doc is not None:
            self.select(pos=query_move(self.doc, self.view().pos_on(self.doc), delta))

    def action_token(self, delta: int) -> None:
        """Move the cursor one token (image tokens included)."""
        if self.doc is not None:
            self.select(pos=max(0, min(self.doc.length - 1, self.view().pos_on(self.doc) + delta)))

    def action_detail(self, delta: int) -> None:
        """Scroll the stage detail."""
        self.query_one(StageDetail).scroll_lines(delta)

    def action_image(self) -> None:
        """Show the next image's heatmap."""
        if self.doc is not None and self.doc.trace.images:
            self.select(image=(self.sel.image + 1) % len(self.doc.trace.images))

    def action_toggle_reference(self) -> None:
        """Show the request's next run: replayed ↔ reference; an endpoint's engine in the burst → engine alone → local model."""
        if self.docs is None:
            self.say("t toggles replayed/reference on a request opened from a replay", error=True)
            return
        doc = self.docs[(self.docs.index(self.doc) + 1) % len(self.docs)] if self.doc in self.docs else self.docs[0]
        self.show_doc(doc)
        self.say(f"showing the {doc.role} trace")

    def action_command(self) -> None:
        """Focus the command bar (at once: keys typed behind `:` go there)."""
        self.set_focus(self.query_one(CommandBar))

    def action_help(self) -> None:
        """Keys and commands, starting with what the focused panel shows."""
        focused = self.focused
        self.app.show_help(focused.id if focused is not None else None)

    def action_back(self) -> None:
        """Cancel a replay in progress; else back to the batch screen (when opened from one), else to the stage list."""
        if self.replays.cancel():
            return
        if len(self.app.screen_stack) > 1:
            self.app.pop_screen()
        else:
            self.query_one(StageList).focus()

    def action_quit(self) -> None:
        """Leave qdebug (the app cancels every run first)."""
        self.quit()

    # keys that drive the live run ----------------------------------------------------------
    def action_next(self) -> None:
        """Run to the next stage boundary."""
        self.runs.next()

    def action_continue(self) -> None:
        """Run to the next breakpoint or the end."""
        self.runs.continue_()

    def action_breakpoint(self) -> None:
        """Toggle a breakpoint on the selected stage."""
        if self.sel.stage is not None:
            self.runs.set_breakpoint(self.sel.stage, self.sel.stage not in self.breakpoints)

    def action_generate(self) -> None:
        """One more token: continue to the next step.K, or rerun with one more token when finished."""
        self.runs.generate()

    def action_rerun(self) -> None:
        """Run the last request again (cancelling the one in progress)."""
        self.runs.rerun()

    def check_action(self, action: str, parameters) -> bool | None:
        """Hide `t` unless there is a reference to toggle to."""
        if action == "toggle_reference":
            return self.docs is not None
        return True
