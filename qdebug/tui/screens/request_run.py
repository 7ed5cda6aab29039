"""The request screen's live-run side: the model arriving, starting/cancelling runs, following the worker, n/c/b/g/r."""

from __future__ import annotations

from dataclasses import replace

from ..messages import RunEvent
from ..session import RunSession
from ..state import TraceDoc
from ..widgets.model_status import ModelStatus


class RunControls:
    """Mixin for RequestScreen: everything that drives a RunSession (the stepper's worker thread)."""

    def model_ready(self, loaded) -> None:
        """The app's loader finished: stages of this model, and the pre-filled request runs."""
        self.loaded = loaded
        if self._ready:
            self._model_settled()

    def model_failed(self, error: str) -> None:
        """The model could not be loaded: say so, keep the UI (open still works)."""
        self.model_error = error
        if self._ready:
            self._model_settled()

    def _model_settled(self) -> None:
        """Show the loader's outcome (called once the widgets exist)."""
        self.query_one(ModelStatus).done()
        if self.model_error is not None:
            dropped = f" (dropped the keys pressed while it loaded: {' '.join(self._queued)})" if self._queued else ""
            self._queued.clear()
            self.say(self.model_error + dropped, error=True)
            self.refresh_view()
            return
        loaded = self.loaded
        self.say(f"model ready: {loaded.spec} ({loaded.adapter.name}, {loaded.device}, {loaded.dtype})")
        if self._run_when_loaded:
            self._run_when_loaded = False
            self.run_command("run")
        else:
            self.refresh_view()

    def start_run(self, request, breakpoints: set[str] | None = None) -> None:
        """Cancel any run in progress and trace `request` in a new stepper worker."""
        if not self.live:
            self.say("no model here (a saved trace is on screen); start `qdebug repl` without --trace to run requests", error=True)
            return
        if self.loaded is None:
            if self.model_error:
                self.say(f"cannot run: {self.model_error}", error=True)
            else:
                self._run_when_loaded = True
                self.say("the model is still loading; the request runs when it is ready")
            return
        previous = self.session
        self._stop_session()
        self.request = request
        self._runs_started += 1  # runs are numbered per screen: the user's first run is run 1
        self.session = RunSession(self.loaded, request, self.breakpoints if breakpoints is None else breakpoints, self.post_message,
                                  run_id=self._runs_started)
        self._outcome, self._awaiting_pause = None, True
        self._restarted_from = previous.id if previous is not None else None
        self.doc = None
        self.docs = None
        self.sel = replace(self.sel, stage="preprocess", pos=None)
        self.session.start()
        if previous is not None:  # a restart must be seen: the screen looks the same when it pauses again
            self.say(f"run {self.session.id} started from the top (run {previous.id} {'cancelled' if not previous.finished else 'ended'}): "
                     f"{request.prompt_text!r}, up to {request.max_new_tokens} tokens")
            self.app.notify(f"run {self.session.id} started; run {previous.id} was replaced", title="new run", timeout=4)
        else:
            self.say(f"run {self.session.id} started: {request.prompt_text!r}, up to {request.max_new_tokens} tokens")
        self.refresh_view()

    def _stop_session(self) -> None:
        """Cancel the current run without waiting (quit joins it)."""
        if self.session is not None and self.session.alive:
            self.session.cancel(timeout=0)
            self._old_sessions.append(self.session)
        self.session = None

    def on_unmount(self) -> None:
        """However the app ends, no stepper thread is left blocked at a breakpoint."""
        self.cancel_all(timeout=2.0)

    def cancel_all(self, timeout: float = 5.0) -> None:
        """Cancel every run (and a replay) this screen started and wait for their threads (on quit)."""
        if self.replay_job is not None:
            self.replay_job.cancel()
        self._stop_session()
        for session in self._old_sessions:
            session.cancel(timeout)
        self._old_sessions.clear()

    def on_run_event(self, event: RunEvent) -> None:
        """Follow the worker: paused → show the snapshot and jump there; done → the full trace."""
        if self.session is None or event.run_id != self.session.id:
            return  # a cancelled run's last words
        tokenizer = self.loaded.processor.tokenizer if self.loaded is not None else None
        images = self.request.images if self.request is not None else None
        if event.kind in ("done", "error", "cancelled"):
            self._outcome = event.kind
        if event.kind == "paused":
            self._awaiting_pause = False
            if event.trace is not None:
                self.doc = TraceDoc(event.trace, complete=False, pil_images=images, source=f"run {event.run_id}", tokenizer=tokenizer)
            restarted = f" (new run; run {self._restarted_from} was replaced)" if self._restarted_from is not None else ""
            self._restarted_from = None
            self.say(f"run {event.run_id} · paused at {event.stage}{restarted}: n next stage · c continue · g next token · b breakpoint")
            self._select_stage(event.stage)
            if self._queued:  # a key pressed while the run was starting acts now
                self.refresh_view()
                self._run_queued()
                return
        elif event.kind == "done":
            self.doc = TraceDoc(event.trace, pil_images=images, source=f"run {event.run_id}", tokenizer=tokenizer)
            self.say(f"done: {event.trace.generated_text!r} ({len(event.trace.steps)} tokens)" + ("" if event.trace.stages and all(s.ok for s in event.trace.stages.values()) else " — some checks failed (✗)"))
            if self._select_last_step and event.trace.steps:
                self._select_last_step = False
                self._select_stage(f"step.{len(event.trace.steps) - 1}")
        elif event.kind == "error":
            self.say(f"run failed: {event.error}", error=True)
        if event.kind in ("done", "error", "cancelled"):
            self._awaiting_pause = False
            if self._queued:
                self.say(f"run {event.run_id} ended before the keys pressed ahead could act: {' '.join(self._queued)} dropped", error=event.kind != "done")
                self._queued.clear()
        self.refresh_view()

    # keys pressed ahead ----------------------------------------------------------------------
    def _starting(self) -> bool:
        """A run is on its way but cannot take a key yet: the model loads with a request waiting, or the
        worker has not reached its first stop."""
        if self._run_when_loaded and self.loaded is None and self.model_error is None:
            return True
        s = self.session
        return s is not None and self._awaiting_pause and not s.finished

    def _queue_key(self, key: str) -> None:
        """Keep a key pressed while the run starts; it acts at the run's next stop (first in, first out)."""
        self._queued.append(key)
        when = "once the model is loaded and the run stops at preprocess" if self.loaded is None else f"when run {self.session.id} stops"
        self.say(f"{' '.join(self._queued)}: queued, acts {when}")

    def _run_queued(self) -> None:
        """The oldest key pressed ahead, now that the run can take it."""
        key = self._queued.pop(0)
        {"n": self.action_next, "c": self.action_continue, "g": self.action_generate}[key]()
        self.say(f"{key} (pressed while the run started): {self.query_one('#message').message[0]}")

    def _live_session(self) -> RunSession | None:
        if self.session is not None and self.session.alive and not self.session.finished:
            return self.session
        if self.live and self.loaded is None and self.model_error is None:
            self.say("no run yet: the model is still loading; `image PATH`, `prompt TEXT`, then `run` (it starts when the model is ready)")
            return None
        if not self.live:
            self.say("no run here: this is a saved trace (↑/↓ move through its stages)", error=True)
        else:
            self.say("no run in progress: r runs the request again, `run` runs the one you composed")
        return None

    def action_next(self) -> None:
        """Run to the next stage boundary."""
        if self._starting():
            self._queue_key("n")
            return
        session = self._live_session()
        if session is not None:
            session.next()
            self.say("running to the next stage…")

    def action_continue(self) -> None:
        """Run to the next breakpoint or the end."""
        if self._starting():
            self._queue_key("c")
            return
        session = self._live_session()
        if session is not None:
            session.continue_()
            self.say("continuing…")

    def set_breakpoint(self, stage: str, on: bool) -> None:
        """Set or clear a breakpoint (on the running worker too)."""
        (self.breakpoints.add if on else self.breakpoints.discard)(stage)
        if self.session is not None and self.session.alive:
            self.session.set_breakpoint(stage, on)
        self.say(f"breakpoint {'set at' if on else 'cleared at'} {stage}")
        self.refresh_view()

    def action_breakpoint(self) -> None:
        """Toggle a breakpoint on the selected stage."""
        if self.sel.stage is not None:
            self.set_breakpoint(self.sel.stage, self.sel.stage not in self.breakpoints)

    def action_generate(self) -> None:
        """One more token: continue to the next step.K, or rerun with one more token when finished."""
        if self._starting():
            self._queue_key("g")
            return
        if self.session is not None and self.session.alive and not self.session.finished:
            self.session.until_next_step()
            self.say("running to the next token…")
            return
        if not self.live or self.request is None:
            self._live_session()
            return
        trace = self.doc.trace if self.doc is not None and self.doc.complete else None
        if trace is not None and len(trace.steps) < self.request.max_new_tokens:
            self.say(f"generation ended at the end-of-sequence token after {len(trace.steps)} tokens; there is no next token")
            return
        from qdebug.trace.request import Request

        more = Request(self.request.parts, self.request.images, self.request.image_paths, self.request.max_new_tokens + 1, self.request.request_id)
        self._select_last_step = True
        self.start_run(more, breakpoints=set())

    def action_rerun(self) -> None:
        """Run the last request again (cancelling the one in progress)."""
        if self.request is None:
            if self.live and not self.pending.empty:
                self.run_command("run")
            else:
                self._live_session()
            return
        self.start_run(self.request)
