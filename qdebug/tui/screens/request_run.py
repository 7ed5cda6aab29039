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
            self.say(self.model_error, error=True)
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
        self._stop_session()
        self.request = request
        self.session = RunSession(self.loaded, request, self.breakpoints if breakpoints is None else breakpoints, self.post_message)
        self.doc = None
        self.docs = None
        self.sel = replace(self.sel, stage="preprocess", pos=None)
        self.session.start()
        self.say(f"run {self.session.id}: {request.prompt_text!r}, up to {request.max_new_tokens} tokens")
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
        """Cancel every run this screen started and wait for their threads (on quit)."""
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
        if event.kind == "paused":
            if event.trace is not None:
                self.doc = TraceDoc(event.trace, complete=False, pil_images=images, source=f"run {event.run_id}", tokenizer=tokenizer)
            self.say(f"paused at {event.stage}: n next stage · c continue · g next token · b breakpoint")
            self._select_stage(event.stage)
        elif event.kind == "done":
            self.doc = TraceDoc(event.trace, pil_images=images, source=f"run {event.run_id}", tokenizer=tokenizer)
            self.say(f"done: {event.trace.generated_text!r} ({len(event.trace.steps)} tokens)" + ("" if event.trace.stages and all(s.ok for s in event.trace.stages.values()) else " — some checks failed (✗)"))
            if self._select_last_step and event.trace.steps:
                self._select_last_step = False
                self._select_stage(f"step.{len(event.trace.steps) - 1}")
        elif event.kind == "error":
            self.say(f"run failed: {event.error}", error=True)
        self.refresh_view()

    def _live_session(self) -> RunSession | None:
        if self.session is not None and self.session.alive and not self.session.finished:
            return self.session
        if not self.live:
            self.say("no run here: this is a saved trace (↑/↓ move through its stages)", error=True)
        else:
            self.say("no run in progress: r runs the request again, `run` runs the one you composed")
        return None

    def action_next(self) -> None:
        """Run to the next stage boundary."""
        session = self._live_session()
        if session is not None:
            session.next()
            self.say("running to the next stage…")

    def action_continue(self) -> None:
        """Run to the next breakpoint or the end."""
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
