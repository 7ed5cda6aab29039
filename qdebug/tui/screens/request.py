"""RequestScreen: one request's stages, their detail, the offset timeline, attention heatmap and top-k.

State lives here (attributes down to the widgets); widgets and workers report back with messages.
A live run is a RunSession whose worker thread blocks at breakpoints; `n`/`c`/`g`/`r` drive it.
"""

from __future__ import annotations

from dataclasses import replace

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer, Static

from ..messages import CommandEntered, FileLoaded, Notice, StageHighlighted
from ..session import PendingRequest, RunSession
from ..state import RunState, Selection, TraceDoc, View, pipeline_stages, query_move, run_line, stage_rows
from ..widgets.attention_view import AttentionView
from ..widgets.command_bar import CommandBar
from ..widgets.message_line import MessageLine
from ..widgets.model_status import ModelStatus
from ..widgets.offset_timeline import OffsetTimeline
from ..widgets.stage_detail import StageDetail
from ..widgets.stage_list import StageList
from ..widgets.topk_panel import TopKPanel
from ..widgets.replay_status import ReplayStatus
from .request_commands import RequestCommands
from .request_replay import ReplayControls
from .request_run import RunControls


class RequestScreen(RunControls, RequestCommands, ReplayControls, Screen):
    """Step through one request (live run or saved trace) and look at every stage."""

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

    def __init__(self, doc: TraceDoc | None = None, *, reference: TraceDoc | None = None, live: bool = False,
                 pending: PendingRequest | None = None, **kwargs):
        super().__init__(**kwargs)
        self.doc = doc
        self.docs = {"replayed": doc, "reference": reference} if reference is not None else None
        if reference is not None:
            doc.counterpart, reference.counterpart = reference, doc
        self.live = live  # a model is (being) loaded: this screen can run requests
        self.pending = pending or PendingRequest()
        self.sel = Selection()
        self.breakpoints: set[str] = {"preprocess"} if live else set()  # a live run stops before it starts
        self.session: RunSession | None = None
        self.request = None  # the Request of the last run
        self.loaded = None
        self.model_error: str | None = None
        self._old_sessions: list[RunSession] = []
        self._select_last_step = False
        self._run_when_loaded = False
        self._queued: list[str] = []  # n / c / g pressed before the run could take them (model loading, run starting)
        self._awaiting_pause = False  # the current run has not stopped anywhere yet
        self._outcome: str | None = None  # how the current run ended (done / error / cancelled)
        self._restarted_from: int | None = None  # the run the current one replaced
        self._runs_started = 0
        self._prefetch_pending = False
        self._pixels_key = None
        self._ready = False  # widgets composed and mounted
        self._info_plain = None

    # layout ------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        """Info line; stages | detail + top-k, timeline, heatmap; model status, messages, command bar, keys."""
        yield Static(id="info")
        with Horizontal(id="main"):
            yield StageList(id="stages")
            with Vertical(id="right"):
                with Horizontal(id="upper"):
                    yield StageDetail(id="detail")
                    yield TopKPanel(id="topk")
                yield OffsetTimeline(id="timeline")
                if self.app.pixels:  # the image with its attention overlay, in real pixels
                    from ..pixels import image_widget

                    with Horizontal(id="attention-row"):
                        attention = AttentionView(id="attention")
                        attention.pixels = True
                        yield attention
                        yield image_widget(self.app.pixels, id="pixels")
                else:
                    yield AttentionView(id="attention")
        if self.live:
            yield ModelStatus(f"loading model {self.app.model_spec.model} on {self.app.model_spec.device}…", id="model-status")
        yield ReplayStatus(id="replay-status")
        yield MessageLine(id="message")
        yield CommandBar(self.stage_names, id="command")
        yield Footer()

    def on_mount(self) -> None:
        """Draw the first frame at once (the model, if any, is still loading)."""
        self.query_one("#detail").border_title = "stage"
        self.query_one("#topk").border_title = "top-k"
        self.query_one("#timeline").border_title = "offsets"
        self.query_one("#attention").border_title = "attention"
        self.query_one("#stages").border_title = "stages"
        if self.doc is not None:
            self.sel = replace(self.sel, stage=self.doc.trace.stage_names[0] if self.doc.trace.stages else None)
        elif self.live and not self.pending.empty:
            self._run_when_loaded = True
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
        self.query_one(StageList).focus()
        if self.loaded is not None or self.model_error is not None:  # the loader finished before the first frame
            self._model_settled()

    # what is on screen ----------------------------------------------------------------
    @property
    def num_layers(self) -> int | None:
        """Decoder layers of the model or trace on screen."""
        if self.doc is not None:
            return self.doc.trace.meta.num_layers or self.doc.trace.num_layers
        if self.loaded is not None:
            return len(self.loaded.adapter.decoder_layers(self.loaded.model))
        return None

    @property
    def num_heads(self) -> int | None:
        """Attention heads per layer."""
        if self.doc is not None:
            return self.doc.trace.meta.num_heads
        if self.loaded is not None:
            return int(self.loaded.adapter.text_config(self.loaded.config).num_attention_heads)
        return None

    def run_state(self) -> RunState | None:
        """The live run's state while it has not finished (None: the document is complete)."""
        if self.session is None or self.session.finished:
            return None
        return self.session.state()

    def stage_names(self) -> list[str]:
        """The stages listed: the trace's, or the pipeline so far for a live run."""
        run = self.run_state()
        if run is None and self.doc is not None:
            return self.doc.trace.stage_names
        names = pipeline_stages(self.num_layers)
        steps = [s for s in (run.reached if run else ()) if s.startswith("step.")]
        names += steps
        if run is not None and run.running and "logits" in run.reached and self.request is not None and len(steps) < self.request.max_new_tokens:
            names.append(f"step.{len(steps)}")
        return names

    def run_line(self) -> str:
        """"run 1 · paused at preprocess": the live run's state, the one wording used everywhere ('' without a run)."""
        if self.session is None:
            if self._run_when_loaded and self.loaded is None and self.model_error is None:
                return f"run {self._runs_started + 1} · waits for the model to load"
            return ""
        return run_line(self.session.id, self.session.state(), self._outcome)

    def view(self) -> View:
        """The View the panels draw."""
        rows = {r.name: r for r in self._rows()}
        status = rows[self.sel.stage].status if self.sel.stage in rows else "done"
        return View(self.doc, self.sel, status, self.run_line())

    def _rows(self):
        return stage_rows(self.stage_names(), self.doc.trace if self.doc else None, self.run_state(), self.breakpoints)

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
        for widget in (self.query_one(StageDetail), self.query_one(TopKPanel), self.query_one(OffsetTimeline), self.query_one(AttentionView)):
            widget.view = view
        if self.app.pixels:
            self._show_pixels(view)
        info = self._info_text()
        if info.plain != self._info_plain:  # an unchanged line must not cost a layout pass
            self._info_plain = info.plain
            self.query_one("#info", Static).update(info)
        if self.doc is not None and self.doc.complete:
            self._schedule_prefetch()

    def _show_pixels(self, view: View) -> None:
        """Give the pixel widget the image with the selection's attention over it (when that changed)."""
        from ..widgets.attention_view import overlay_for

        key = self.query_one(AttentionView).view_key(view)
        if key != self._pixels_key:
            self._pixels_key = key
            widget = self.query_one("#pixels")
            image = overlay_for(view)
            widget.image = image
            widget.display = image is not None

    def _info_text(self) -> Text:
        text = Text()
        if self.docs is not None:
            other = self.doc.counterpart
            text.append(f"request {self.doc.trace.request.get('id', '?')} · {self.doc.role} → {self.doc.trace.generated_text!r}", style="bold magenta")
            text.append(f"   (t: {other.role} → {other.trace.generated_text!r})", style="dim")
            return text
        elif self.live:
            spec, loaded = self.app.model_spec, self.loaded
            if loaded is not None:
                text.append(f"model {loaded.spec} ({loaded.device}, {loaded.dtype}) · ", style="bold")
            else:
                text.append(f"model {spec.model} {'failed' if self.model_error else 'loading…'} · ", style="bold")
            line = self.run_line()
            if line:
                paused = self.session is not None and self.session.stepper.paused_at is not None and self._outcome is None
                text.append(f"{line} · ", style="bold black on yellow" if paused else "bold yellow")
            elif self.doc is None:
                ready = "runs when the model is loaded" if self._run_when_loaded else "`run` starts it"
                text.append(f"no run yet · next request: {self.pending.describe()} ({ready})", style="dim")
        if self.doc is not None:
            trace = self.doc.trace
            if self.doc.source and not (self.live and self.session is not None):
                text.append(f"{self.doc.source} · ", style="bold")
            if not self.docs:
                text.append(f"prompt {trace.request.get('prompt', '')!r} · ", style="dim")
            if trace.generated_text or self.doc.complete:
                text.append(f"→ {trace.generated_text!r}", style="bold green")
            if not self.doc.complete:
                text.append(" (so far)" if trace.generated_text else "nothing generated yet", style="dim")
        return text

    def say(self, text: str, error: bool = False) -> None:
        """Show a line in the message bar."""
        self.query_one(MessageLine).say(text, error)

    # messages up ------------------------------------------------------------------------
    def on_stage_highlighted(self, event: StageHighlighted) -> None:
        """Follow the stage cursor: layer.N picks the heatmap layer, step.K the query that chose it."""
        if event.stage == self.query_one(StageList).current:  # drop stale events from programmatic moves
            self._select_stage(event.stage)

    def _stage_changes(self, stage: str) -> dict:
        """What selecting `stage` changes: layer.N picks the heatmap layer, step.K the query that chose it."""
        changes: dict = {"stage": stage}
        if stage.startswith("layer."):
            changes["layer"] = int(stage.split(".")[1])
        elif stage.startswith("step.") and self.doc is not None:
            changes["pos"] = self.doc.prompt_len - 1 + int(stage.split(".")[1])
        return changes

    def _select_stage(self, stage: str) -> None:
        changes = self._stage_changes(stage)
        if replace(self.sel, **changes) != self.sel:
            self.select(**changes)

    def _schedule_prefetch(self) -> None:
        """Once the frame is out, render the neighbouring stages' panels (one panel per idle turn)."""
        if not self._prefetch_pending:
            self._prefetch_pending = True
            self.call_after_refresh(self._prefetch_neighbours)

    def _prefetch_neighbours(self) -> None:
        self._prefetch_pending = False
        rows = self.query_one(StageList).rows
        names = [r.name for r in rows]
        if self.doc is None or self.sel.stage not in names:
            return
        i = names.index(self.sel.stage)
        panels = [self.query_one(StageDetail), self.query_one(AttentionView), self.query_one(TopKPanel), self.query_one(OffsetTimeline)]
        jobs = []
        for j in (i + 1, i - 1):  # ↓ is the usual direction: first
            if 0 <= j < len(names):
                view = View(self.doc, replace(self.sel, **self._stage_changes(names[j])), rows[j].status, self.run_line())
                jobs.extend((panel, view) for panel in panels)

        def step() -> None:
            if jobs and self.is_current:
                panel, view = jobs.pop(0)
                panel.prefetch(view)
                self.call_later(step)  # yield to pending keys between panels

        step()

    def on_command_entered(self, event: CommandEntered) -> None:
        """Run a command from the bar."""
        self.run_command(event.line)

    def on_notice(self, event: Notice) -> None:
        """A worker's result or error."""
        self.say(event.text, event.error)

    def on_file_loaded(self, event: FileLoaded) -> None:
        """`open`/`replay` finished: show the trace here, or a report on the batch screen."""
        if event.kind == "report":
            from .batch import BatchScreen

            self.app.push_screen(BatchScreen(event.value, source=event.path))
            return
        self._stop_session()
        self.docs = None
        self.show_doc(TraceDoc(event.value, source=event.path))
        self.say(f"opened {event.path}")

    def show_doc(self, doc: TraceDoc) -> None:
        """Put a document on screen, keeping the selection where it still makes sense."""
        self.doc = doc
        names = self.stage_names()
        stage = self.sel.stage if self.sel.stage in names else (names[0] if names else None)
        layer = self.sel.layer if self.sel.layer is None or self.sel.layer < (self.num_layers or 0) else None
        pos = self.sel.pos if self.sel.pos is not None and self.sel.pos < doc.length else None
        self.sel = replace(self.sel, stage=stage, layer=layer, pos=pos, image=min(self.sel.image, max(0, len(doc.trace.images) - 1)))
        self.refresh_view()

    # keys ----------------------------------------------------------------------------------
    def action_stage(self, delta: int) -> None:
        """Move the stage cursor and redraw the panels in the same handler (one frame per key)."""
        names = [r.name for r in self.query_one(StageList).rows]
        if not names:
            return
        index = names.index(self.sel.stage) + delta if self.sel.stage in names else 0
        self._select_stage(names[max(0, min(len(names) - 1, index))])

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
            self.select(pos=query_move(self.doc, self.view().pos, delta))

    def action_token(self, delta: int) -> None:
        """Move the cursor one token (image tokens included)."""
        if self.doc is not None:
            self.select(pos=max(0, min(self.doc.length - 1, self.view().pos + delta)))

    def action_detail(self, delta: int) -> None:
        """Scroll the stage detail."""
        self.query_one(StageDetail).scroll_lines(delta)

    def action_image(self) -> None:
        """Show the next image's heatmap."""
        if self.doc is not None and self.doc.trace.images:
            self.select(image=(self.sel.image + 1) % len(self.doc.trace.images))

    def action_toggle_reference(self) -> None:
        """Swap the replayed trace and the isolated reference."""
        if self.docs is None:
            self.say("t toggles replayed/reference on a request opened from a replay", error=True)
            return
        role = "reference" if self.doc is self.docs["replayed"] else "replayed"
        self.show_doc(self.docs[role])
        self.say(f"showing the {role} trace")

    def action_command(self) -> None:
        """Focus the command bar (at once: keys typed behind `:` go there)."""
        self.set_focus(self.query_one(CommandBar))

    def action_help(self) -> None:
        """Keys and commands, starting with what the focused panel shows."""
        from .help import HelpScreen

        focused = self.focused
        self.app.push_screen(HelpScreen(focused.id if focused is not None else None))

    def action_back(self) -> None:
        """Cancel a replay in progress; else back to the batch screen (when opened from one), else to the stage list."""
        if self.cancel_replay():
            return
        if len(self.app.screen_stack) > 1:
            self.app.pop_screen()
        else:
            self.query_one(StageList).focus()

    def action_quit(self) -> None:
        """Leave qdebug (the app cancels every run first)."""
        self.app.quit_app()

    def check_action(self, action: str, parameters) -> bool | None:
        """Hide `t` unless there is a reference to toggle to."""
        if action == "toggle_reference":
            return self.docs is not None
        return True
