"""RunController: the request screen's live runs: the model arriving, starting and cancelling runs, following the
stepper's worker, the keys n/c/b/g/r and the keys pressed before a run could take them."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from qdebug.vocab import step_stage

from ..session import PendingRequest, RunSession
from ..state import RunState, StageRow, TraceDoc, run_line, stage_rows

if TYPE_CHECKING:  # torch and transformers load with the model, not with the screen
    from qdebug.model.load import LoadedModel
    from qdebug.trace.request import Request


class RunHost(Protocol):
    """What the run controller needs from the screen it drives."""

    doc: TraceDoc | None

    def say(self, text: str, error: bool = False) -> None:
        """Show a line in the message bar."""

    def last_said(self) -> str:
        """The line the message bar shows now."""

    def refresh_view(self) -> None:
        """Push the current state down to the widgets."""

    def select_stage(self, stage: str) -> None:
        """Move the selection to `stage`."""

    def clear_for_run(self) -> None:
        """No document on screen, the cursor back at preprocess: a new run starts."""

    def run_command(self, line: str) -> None:
        """Run a command-bar line."""

    def post_message(self, message) -> bool:
        """Post a message to the screen (thread-safe)."""

    def notify(self, message: str, *, title: str = "", timeout: float | None = None) -> None:
        """A toast."""


class RunController:
    """Owns the current RunSession and everything about runs: the model, breakpoints, outcome, keys pressed ahead."""

    def __init__(self, host: RunHost, *, live: bool, pending: PendingRequest, breakpoints: set[str]):
        self.host = host
        self.live = live  # a model is (being) loaded: this screen can run requests
        self.pending = pending  # the request the command bar composes
        self.breakpoints = breakpoints  # the screen's set: the stage list marks them
        self.session: RunSession | None = None
        self.request: Request | None = None  # the Request of the last run
        self.loaded: LoadedModel | None = None
        self.model_error: str | None = None
        self.run_when_loaded = False  # a request waits for the model
        self.queued: list[str] = []  # n / c / g pressed before the run could take them (model loading, run starting)
        self.outcome: str | None = None  # how the current run ended (done / error / cancelled)
        self._old_sessions: list[RunSession] = []
        self._select_last_step = False
        self._awaiting_pause = False  # the current run has not stopped anywhere yet
        self._restarted_from: int | None = None  # the run the current one replaced
        self._runs_started = 0

    # the model ------------------------------------------------------------------------------
    def model_settled(self) -> None:
        """Say how loading the model ended (once the widgets exist); a waiting request runs now."""
        if self.model_error is not None:
            dropped = f" (dropped the keys pressed while it loaded: {' '.join(self.queued)})" if self.queued else ""
            self.queued.clear()
            self.host.say(self.model_error + dropped, error=True)
            self.host.refresh_view()
            return
        loaded = self.loaded
        assert loaded is not None  # settled without an error: the loader handed the model over (model_ready)
        self.host.say(f"model ready: {loaded.spec} ({loaded.adapter.name}, {loaded.device}, {loaded.dtype})")
        if self.run_when_loaded:
            self.run_when_loaded = False
            self.host.run_command("run")
        else:
            self.host.refresh_view()

    @property
    def waiting_for_model(self) -> bool:
        """A request waits for a model that is still loading."""
        return self.run_when_loaded and self.loaded is None and self.model_error is None

    # where the run stands ---------------------------------------------------------------------
    def state(self) -> RunState | None:
        """The live run's state while it has not finished (None: the document is complete)."""
        if self.session is None or self.session.finished:
            return None
        return self.session.state()

    def line(self) -> str:
        """"run 1 · paused at preprocess": the live run's state, the one wording used everywhere ('' without a run)."""
        if self.session is None:
            if self.waiting_for_model:
                return f"run {self._runs_started + 1} · waits for the model to load"
            return ""
        return run_line(self.session.id, self.session.state(), self.outcome)

    def rows(self, names: list[str], doc: TraceDoc | None) -> list[StageRow]:
        """The stages `names` with their status: reached by the run (or done in `doc`), paused there, a breakpoint."""
        return stage_rows(names, doc.trace if doc else None, self.state(), self.breakpoints)

    @property
    def paused(self) -> bool:
        """The run is stopped at a stage (not ended)."""
        return self.session is not None and self.session.stepper.paused_at is not None and self.outcome is None

    # starting and stopping --------------------------------------------------------------------
    def start(self, request, breakpoints: set[str] | None = None) -> None:
        """Cancel any run in progress and trace `request` in a new stepper worker."""
        say = self.host.say
        if not self.live:
            say("no model here (a saved trace is on screen); start `qdebug repl` without --trace to run requests", error=True)
            return
        if self.loaded is None:
            if self.model_error:
                say(f"cannot run: {self.model_error}", error=True)
            else:
                self.run_when_loaded = True
                say("the model is still loading; the request runs when it is ready")
            return
        previous = self.session
        self.stop()
        self.request = request
        self._runs_started += 1  # runs are numbered per screen: the user's first run is run 1
        self.session = RunSession(self.loaded, request, self.breakpoints if breakpoints is None else breakpoints, self.host.post_message,
                                  run_id=self._runs_started)
        self.outcome, self._awaiting_pause = None, True
        self._restarted_from = previous.id if previous is not None else None
        self.host.clear_for_run()
        self.session.start()
        if previous is not None:  # a restart must be seen: the screen looks the same when it pauses again
            say(f"run {self.session.id} started from the top (run {previous.id} {'cancelled' if not previous.finished else 'ended'}): "
                f"{request.prompt_text!r}, up to {request.max_new_tokens} tokens")
            self.host.notify(f"run {self.session.id:d} started; run {previous.id:d} was replaced", title="new run", timeout=4)
        else:
            say(f"run {self.session.id} started: {request.prompt_text!r}, up to {request.max_new_tokens} tokens")
        self.host.refresh_view()

    def stop(self) -> None:
        """Cancel the current run without waiting (quit joins it)."""
        if self.session is not None and self.session.alive:
            self.session.cancel(timeout=0)
            self._old_sessions.append(self.session)
        self.session = None

    def cancel_all(self, timeout: float = 5.0) -> None:
        """Cancel every run this controller started and wait for their threads (on quit)."""
        self.stop()
        for session in self._old_sessions:
            session.cancel(timeout)
        self._old_sessions.clear()

    # following the worker ---------------------------------------------------------------------
    def follow(self, event: RunSession.Event) -> None:
        """Paused → show the snapshot and jump there; done → the full trace."""
        if self.session is None or event.run_id != self.session.id:
            return  # a cancelled run's last words
        host = self.host
        tokenizer = self.loaded.processor.tokenizer if self.loaded is not None else None
        images = self.request.images if self.request is not None else None
        if event.kind in ("done", "error", "cancelled"):
            self.outcome = event.kind
        if event.kind == "paused":
            self._awaiting_pause = False
            if event.trace is not None:
                host.doc = TraceDoc(event.trace, complete=False, pil_images=images, source=f"run {event.run_id}", tokenizer=tokenizer)
            restarted = f" (new run; run {self._restarted_from} was replaced)" if self._restarted_from is not None else ""
            self._restarted_from = None
            host.say(f"run {event.run_id} · paused at {event.stage}{restarted}: n next stage · c continue · g next token · b breakpoint")
            if event.stage is not None:  # a pause always names its stage
                host.select_stage(event.stage)
            if self.queued:  # a key pressed while the run was starting acts now
                host.refresh_view()
                self._run_queued()
                return
        elif event.kind == "done" and event.trace is not None:  # "done" carries the final trace
            trace = event.trace
            host.doc = TraceDoc(trace, pil_images=images, source=f"run {event.run_id}", tokenizer=tokenizer)
            host.say(f"done: {trace.generated_text!r} ({len(trace.steps)} tokens)" + ("" if trace.stages and all(s.ok for s in trace.stages.values()) else " — some checks failed (✗)"))
            if self._select_last_step and trace.steps:
                self._select_last_step = False
                host.select_stage(step_stage(len(trace.steps) - 1))
        elif event.kind == "error":
            host.say(f"run failed: {event.error}", error=True)
        if event.kind in ("done", "error", "cancelled"):
            self._awaiting_pause = False
            if self.queued:
                host.say(f"run {event.run_id} ended before the keys pressed ahead could act: {' '.join(self.queued)} dropped", error=event.kind != "done")
                self.queued.clear()
        host.refresh_view()

    # keys pressed ahead -----------------------------------------------------------------------
    def _starting(self) -> bool:
        """A run is on its way but cannot take a key yet: the model loads with a request waiting, or the
        worker has not reached its first stop."""
        if self.waiting_for_model:
            return True
        s = self.session
        return s is not None and self._awaiting_pause and not s.finished

    def _queue_key(self, key: str) -> None:
        """Keep a key pressed while the run starts; it acts at the run's next stop (first in, first out)."""
        self.queued.append(key)
        session = self.session  # set whenever the model is (a key waits for a run that is starting)
        when = ("once the model is loaded and the run stops at preprocess" if self.loaded is None or session is None
                else f"when run {session.id} stops")
        self.host.say(f"{' '.join(self.queued)}: queued, acts {when}")

    def _run_queued(self) -> None:
        """The oldest key pressed ahead, now that the run can take it."""
        key = self.queued.pop(0)
        {"n": self.next, "c": self.continue_, "g": self.generate}[key]()
        self.host.say(f"{key} (pressed while the run started): {self.host.last_said()}")

    def _live_session(self) -> RunSession | None:
        if self.session is not None and self.session.alive and not self.session.finished:
            return self.session
        say = self.host.say
        if self.live and self.loaded is None and self.model_error is None:
            say("no run yet: the model is still loading; `image PATH`, `prompt TEXT`, then `run` (it starts when the model is ready)")
            return None
        if not self.live:
            say("no run here: this is a saved trace (↑/↓ move through its stages)", error=True)
        else:
            say("no run in progress: r runs the request again, `run` runs the one you composed")
        return None

    # the keys ---------------------------------------------------------------------------------
    def next(self) -> None:
        """Run to the next stage boundary."""
        self._advance("n", RunSession.next, "running to the next stage…")

    def continue_(self) -> None:
        """Run to the next breakpoint or the end."""
        self._advance("c", RunSession.continue_, "continuing…")

    def _advance(self, key: str, move: Callable[[RunSession], None], said: str) -> None:
        """Move the live run on (`key` is queued while its worker is still starting)."""
        if self._starting():
            self._queue_key(key)
            return
        session = self._live_session()
        if session is not None:
            move(session)
            self.host.say(said)

    def set_breakpoint(self, stage: str, on: bool) -> None:
        """Set or clear a breakpoint (on the running worker too)."""
        (self.breakpoints.add if on else self.breakpoints.discard)(stage)
        if self.session is not None and self.session.alive:
            self.session.set_breakpoint(stage, on)
        self.host.say(f"breakpoint {'set at' if on else 'cleared at'} {stage}")
        self.host.refresh_view()

    def generate(self) -> None:
        """One more token: continue to the next step.K, or rerun with one more token when finished."""
        if self._starting():
            self._queue_key("g")
            return
        if self.session is not None and self.session.alive and not self.session.finished:
            self.session.until_next_step()
            self.host.say("running to the next token…")
            return
        if not self.live or self.request is None:
            self._live_session()
            return
        doc = self.host.doc
        trace = doc.trace if doc is not None and doc.complete else None
        if trace is not None and len(trace.steps) < self.request.max_new_tokens:
            # a rerun would end at the same token: g reruns only a run cut short by max_new_tokens (help says the same)
            self.host.say(f"generation ended at the end-of-sequence token after {len(trace.steps)} tokens, before the limit of "
                          f"{self.request.max_new_tokens}: there is no next token (g reruns with one more only at the limit)")
            return
        from dataclasses import replace

        more = replace(self.request, max_new_tokens=self.request.max_new_tokens + 1)  # keeps audio clips too
        self._select_last_step = True
        self.start(more, breakpoints=set())

    def rerun(self) -> None:
        """Run the last request again (cancelling the one in progress)."""
        if self.request is None:
            if self.live and not self.pending.empty:
                self.host.run_command("run")
            else:
                self._live_session()
            return
        self.start(self.request)
