"""Stepper: run one traced request in a worker thread that really pauses at stage breakpoints.

The forward pass blocks inside the stage-boundary hook until the controller says go on, like a debugger
stopped at a line. Cancelling unblocks the hook with an exception, so the thread ends and the hooks are removed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from qdebug.vocab import EVERY_STEP, StageName, is_step_stage

from .request import Request
from .runner import RecordPolicy, Prepared, prepare, trace_request
from .schema import Trace


class Cancelled(Exception):
    """Raised inside the worker when the run is cancelled (quit, rerun)."""


class Stepper:
    """Control one request's run: `next()` to the following stage, `continue_()` to the next breakpoint.

    `on_event(kind, stage)` is called from the worker thread: kind is "paused", "reached", "done", "error"
    or "cancelled" (stage is None for the last three). Breakpoints are stage names; "step.*" matches every step.
    """

    def __init__(
        self,
        loaded,
        request: Request,
        options: RecordPolicy | None = None,
        breakpoints: set[str] | None = None,
        on_event: Callable[[str, str | None], None] | None = None,
    ):
        self.loaded, self.request = loaded, request
        self.options = options or RecordPolicy()
        self.breakpoints = set(breakpoints if breakpoints is not None else {StageName.PREPROCESS})
        self.on_event = on_event or (lambda kind, stage: None)
        self.reached: list[str] = []
        self.paused_at: str | None = None
        self.trace: Trace | None = None
        self.error: BaseException | None = None
        self.prepared: Prepared | None = None
        self._go = threading.Event()
        self._step_mode = False  # True: pause at the very next stage
        self._cancelled = False
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    # controller side ---------------------------------------------------------
    def start(self) -> None:
        """Start the worker thread (it runs to the first breakpoint)."""
        self._thread = threading.Thread(target=self._run, name="qdebug-stepper", daemon=True)
        self._thread.start()

    def next(self) -> None:
        """Run to the next stage boundary."""
        with self._lock:
            self._step_mode = True
            self._go.set()

    def continue_(self) -> None:
        """Run to the next breakpoint or the end."""
        with self._lock:
            self._step_mode = False
            self._go.set()

    def toggle_breakpoint(self, stage: str) -> bool:
        """Toggle a breakpoint; returns whether it is now set."""
        with self._lock:
            if stage in self.breakpoints:
                self.breakpoints.discard(stage)
                return False
            self.breakpoints.add(stage)
            return True

    def cancel(self, timeout: float | None = 5.0) -> None:
        """Stop the worker: unblock it with Cancelled and wait for it to finish."""
        self._cancelled = True
        self._go.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def running(self) -> bool:
        """Whether the worker thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def join(self, timeout: float | None = None) -> None:
        """Wait for the worker to end."""
        if self._thread is not None:
            self._thread.join(timeout)

    # worker side -------------------------------------------------------------
    def _should_pause(self, stage: str) -> bool:
        if self._step_mode or stage in self.breakpoints:
            return True
        return is_step_stage(stage) and EVERY_STEP in self.breakpoints

    def _on_stage(self, stage: str) -> None:
        if self._cancelled:
            raise Cancelled()
        self.reached.append(stage)
        self.on_event("reached", stage)
        with self._lock:
            pause = self._should_pause(stage)
            if pause:
                self._go.clear()
                self._step_mode = False
        if pause:
            self.paused_at = stage
            self.on_event("paused", stage)
            self._go.wait()
            self.paused_at = None
            if self._cancelled:
                raise Cancelled()

    def _run(self) -> None:
        try:
            self.prepared = prepare(self.loaded, self.request)
            self.trace = trace_request(self.loaded, self.request, self.options, on_stage=self._on_stage, prepared=self.prepared)
        except Cancelled:
            self.on_event("cancelled", None)
            return
        except BaseException as exc:  # reported to the UI, never raised in a worker
            self.error = exc
            self.on_event("error", None)
            return
        self.on_event("done", None)
