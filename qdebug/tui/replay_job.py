"""ReplayJob: `replay FILE` in the TUI, run in a worker thread with progress messages and Esc to cancel.

The same steps as the CLI's `qdebug replay` with its default settings (threads, 4 at a time, no fault): read the
batch, run each request alone, then together; every finished request posts a ReplayJob.Progress.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from textual.message import Message


class ReplayJob:
    """One replay: `run()` in a worker thread; `cancel()` from the UI stops it after the requests in flight."""

    @dataclass
    class Progress(Message):
        """The replay moved on: references and replayed requests done out of `total`, contaminated so far."""

        references: int
        replayed: int
        total: int
        contaminated: int

    @dataclass
    class Ended(Message):
        """The replay ended: its report, or None when it was cancelled or failed (`ran`: requests replayed by then,
        -1 with `error` when it failed)."""

        path: str
        report: object | None
        ran: int = 0
        total: int = 0
        contaminated: int = 0
        references: int = 0
        error: str | None = None

    def __init__(self, path: Path, post: Callable[[object], object], loaded=None):
        self.path, self.post, self.loaded = path, post, loaded
        self.cancelled = threading.Event()
        self.references = self.replayed = self.contaminated = self.total = 0

    def cancel(self) -> None:
        """Stop: requests not started are skipped, the report is not shown."""
        self.cancelled.set()

    @property
    def cancelling(self) -> bool:
        """Whether cancel() was called."""
        return self.cancelled.is_set()

    def _on_progress(self, phase: str, rid: str, clean: bool) -> None:
        if phase == "reference":
            self.references += 1
        else:
            self.replayed += 1
            self.contaminated += not clean
        self.post(self.Progress(self.references, self.replayed, self.total, self.contaminated))

    def run(self) -> None:
        """Read, replay, analyse; posts Ended (report None when cancelled). Errors propagate (one line)."""
        from qdebug.analysis.replay import report_from_log, report_from_replay
        from qdebug.replay.engine import ReplaySettings, replay
        from qdebug.replay.formats.detect import read_batch

        batch = read_batch(self.path)
        if batch.kind == "runtime-log":  # a log is read, not re-executed: nothing to wait for
            self.post(self.Ended(str(self.path), report_from_log(batch)))
            return
        self.total = sum(1 for r in batch.requests if r.request is not None)
        self.post(self.Progress(0, 0, self.total, 0))
        loaded = self.loaded or _default_model()
        if self.cancelling:
            self.post(self.Ended(str(self.path), None, 0, self.total))
            return
        run = replay(loaded, batch, ReplaySettings(), on_progress=self._on_progress, cancel=self.cancelled)
        if run.interrupted or self.cancelling:
            self.post(self.Ended(str(self.path), None, self.replayed, self.total, self.contaminated, self.references))
            return
        self.post(self.Ended(str(self.path), report_from_replay(batch, run), self.replayed, self.total, self.contaminated))


def _default_model():
    """The demo model, as `qdebug replay` loads it by default (CPU unless CUDA is there)."""
    import torch

    from qdebug.commands.common import quiet_transformers
    from qdebug.model.load import load_model

    quiet_transformers()
    return load_model("demo", "auto" if torch.cuda.is_available() else "cpu", "auto", "eager")


def progress_line(p: ReplayJob.Progress, path: str) -> str:
    """The message-bar line for a replay in progress."""
    return (f"replaying {Path(path).name}: references {p.references}/{p.total} · replayed {p.replayed}/{p.total} · "
            f"contaminated so far {p.contaminated} · Esc cancels")
