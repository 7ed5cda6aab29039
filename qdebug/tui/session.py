"""RunSession: one live run of a request, driven by a Stepper; its events become RunSession.Event messages.

The Stepper's worker thread really blocks at breakpoints. Its callbacks run in that thread, so they only
build a snapshot (while the forward pass is stopped) and post a message: the UI thread never waits on the model.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from textual.message import Message

from qdebug.errors import describe
from qdebug.vocab import EVERY_STEP, is_step_stage

from .state import RunState

if TYPE_CHECKING:
    from qdebug.trace.schema import Trace

_run_ids = itertools.count(1)


@dataclass
class PendingRequest:
    """The request the command bar is composing: images, prompt, tokens to generate."""

    image_paths: list[Path] = field(default_factory=list)
    prompt: str | None = None
    max_new_tokens: int = 16

    @property
    def empty(self) -> bool:
        """Nothing to run yet."""
        return not self.image_paths and not self.prompt

    def build(self, max_new_tokens: int | None = None):
        """The Request (images opened now; ImageError/PlaceholderError with a one-line message)."""
        from qdebug.trace.request import build_request

        return build_request(self.prompt or "", self.image_paths, max_new_tokens=max_new_tokens or self.max_new_tokens)

    def describe(self) -> str:
        """One line: images and prompt."""
        images = ", ".join(p.name for p in self.image_paths) or "no image"
        return f"{images} · prompt {self.prompt!r}" if self.prompt else f"{images} · no prompt"


class RunSession:
    """Start, step, continue and cancel one traced request; `post(RunSession.Event)` is called from the worker thread."""

    @dataclass
    class Event(Message):
        """The run reached/paused at a stage, or ended (done/error/cancelled). `trace`: snapshot or final trace."""

        run_id: int
        kind: str
        stage: str | None
        trace: Trace | None = None
        error: str | None = None

    def __init__(self, loaded, request, breakpoints: set[str], post: Callable[[RunSession.Event], object], run_id: int | None = None):
        from qdebug.trace.stepper import Stepper

        self.id = run_id if run_id is not None else next(_run_ids)
        self.loaded, self.request, self.post = loaded, request, post
        self.finished = False
        self._one_shot_step = False  # "step.*" was added by `g` and is removed at the next step
        self.stepper = Stepper(loaded, request, breakpoints=set(breakpoints), on_event=self._on_event)

    # controller side (UI thread) ------------------------------------------------
    def start(self) -> None:
        """Start the worker; it runs to the first breakpoint."""
        self.stepper.start()

    def next(self) -> None:
        """Run to the next stage boundary."""
        self.stepper.next()

    def continue_(self) -> None:
        """Run to the next breakpoint or the end."""
        self.stepper.continue_()

    def until_next_step(self) -> None:
        """Continue to the next generated token (the next step.K), wherever the run is paused."""
        if EVERY_STEP not in self.stepper.breakpoints:
            self.stepper.toggle_breakpoint(EVERY_STEP)
            self._one_shot_step = True
        self.stepper.continue_()

    def set_breakpoint(self, stage: str, on: bool) -> None:
        """Set or clear a breakpoint on the running stepper."""
        if (stage in self.stepper.breakpoints) != on:
            self.stepper.toggle_breakpoint(stage)

    def cancel(self, timeout: float | None = 5.0) -> None:
        """Unblock and stop the worker; wait up to `timeout` seconds for its thread to end (0: don't wait)."""
        self.stepper.cancel(timeout)

    @property
    def alive(self) -> bool:
        """Whether the worker thread is still running (paused or computing)."""
        return self.stepper.running

    def state(self) -> RunState:
        """A snapshot of where the run stands, for the stage list."""
        s = self.stepper
        return RunState(tuple(s.reached), s.paused_at, s.running and not self.finished, self.finished)

    # worker side ------------------------------------------------------------------
    def _on_event(self, kind: str, stage: str | None) -> None:
        if kind == "paused":
            if self._one_shot_step and stage is not None and is_step_stage(stage):
                self.stepper.toggle_breakpoint(EVERY_STEP)
                self._one_shot_step = False
            self.post(self.Event(self.id, kind, stage, self._snapshot()))
        elif kind == "reached":
            self.post(self.Event(self.id, kind, stage, None))
        else:  # done / error / cancelled: the thread is about to end
            self.finished = True
            error = None
            if kind == "error" and self.stepper.error is not None:
                exc = self.stepper.error
                error = describe(exc)
            self.post(self.Event(self.id, kind, None, self.stepper.trace if kind == "done" else None, error))

    def _snapshot(self):
        """The partial trace as far as the run got (None if it cannot be built)."""
        from qdebug.trace.hooks import current_recorder

        from .live import snapshot

        if self.stepper.prepared is None:
            return None
        try:
            return snapshot(self.loaded, self.request, self.stepper.prepared, current_recorder(), list(self.stepper.reached))
        except Exception:  # a snapshot is a convenience; never let it kill the run
            return None
