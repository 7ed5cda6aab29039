"""ReplayJob: `replay FILE` in the TUI, run in a worker thread with progress messages and Esc to cancel.

The CLI's own `run_replay` with its default settings (threads, 4 at a time, no fault): read the batch, run each
request alone, then together; every finished request posts a ReplayJob.Progress. Nothing here imports torch.
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
        """Read, replay, analyse with the CLI's own `run_replay` (logs through its on-disk index); posts Ended
        (report None when cancelled). Errors propagate (one line)."""
        from qdebug.commands.replay import default_replay_args, run_replay

        report = run_replay(default_replay_args(self.path), loaded=self.loaded, on_total=self._on_total,
                            on_progress=self._on_progress, cancel=self.cancelled)
        if report.kind == "runtime-log":  # a log is read, not re-executed: nothing was cancelled
            self.post(self.Ended(str(self.path), report))
        elif report.interrupted or self.cancelling:
            self.post(self.Ended(str(self.path), None, self.replayed, self.total, self.contaminated, self.references))
        else:
            self.post(self.Ended(str(self.path), report, self.replayed, self.total, self.contaminated))

    def _on_total(self, total: int) -> None:
        self.total = total
        self.post(self.Progress(0, 0, total, 0))


def progress_line(p: ReplayJob.Progress, path: str) -> str:
    """The message-bar line for a replay in progress."""
    return (f"replaying {Path(path).name}: references {p.references}/{p.total} · replayed {p.replayed}/{p.total} · "
            f"contaminated so far {p.contaminated} · Esc cancels")
