"""ReplayController: the request screen's `replay FILE` of a capture: a ReplayJob in a worker, its progress on
screen, Esc to cancel, and the report handed to the file router when it is done."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from qdebug.errors import describe

from ..replay_job import ReplayJob, progress_line


class ReplayHost(Protocol):
    """What the replay controller needs from the screen it runs on."""

    def say(self, text: str, error: bool = False) -> None:
        """Show a line in the message bar."""

    def post_message(self, message) -> bool:
        """Post a message to the screen (thread-safe)."""

    def run_worker(self, work, *, thread: bool, group: str):
        """Run `work` in a worker of the screen."""


class ReplayStatusBar(Protocol):
    """Where the replay's progress shows (the request screen's panels)."""

    def show_replay_status(self, line: str, done: int | None = None, total: int | None = None) -> None:
        """Show the progress line and bar under the panels."""

    def hide_replay_status(self) -> None:
        """The replay ended: hide its progress."""


class ReplayController:
    """Start, follow and cancel one replay at a time; its progress on `status`; `show_report(report, source)` shows a
    finished one."""

    def __init__(self, host: ReplayHost, status: ReplayStatusBar, show_report: Callable[[object, str], None]):
        self.host = host
        self.status = status
        self.show_report = show_report
        self.job: ReplayJob | None = None

    def start(self, path: Path, loaded) -> None:
        """Replay a capture or read a runtime log with `loaded` (None: the demo model); progress shows under the panels."""
        if self.job is not None:
            self.host.say(f"a replay of {self.job.path.name} is running (Esc cancels it first)", error=True)
            return
        job = self.job = ReplayJob(path, self.host.post_message, loaded=loaded)
        model = "" if loaded is not None else " (loading the demo model first)"
        self.status.show_replay_status(f"replaying {path.name}{model} · Esc cancels")
        self.host.say(f"replaying {path}{model}… Esc cancels")

        def run() -> None:
            try:
                job.run()
            except Exception as exc:  # QDebugError carries a one-line message
                job.post(ReplayJob.Ended(str(job.path), None, -1, job.total, error=f"replay {job.path}: {describe(exc)}"))

        self.host.run_worker(run, thread=True, group="replay")

    def stop(self) -> None:
        """Cancel the replay in progress without a word (the screen is going away)."""
        if self.job is not None:
            self.job.cancel()

    def cancel(self) -> bool:
        """Cancel the replay in progress, if any (Esc); True when there was one."""
        job = self.job
        if job is None:
            return False
        if not job.cancelling:
            job.cancel()
            self.host.say(f"cancelling the replay of {job.path.name}: the requests in flight finish first…")
            self.status.show_replay_status(f"cancelling the replay of {job.path.name}…")
        return True

    def follow(self, event: ReplayJob.Progress | ReplayJob.Ended) -> None:
        """A replay moved on or ended."""
        if isinstance(event, ReplayJob.Ended):
            self.ended(event)
        else:
            self.progress(event)

    def progress(self, event: ReplayJob.Progress) -> None:
        """References, then replays: the bar counts both."""
        job = self.job
        if job is None or job.cancelling:
            return
        self.status.show_replay_status(progress_line(event, str(job.path)), event.references + event.replayed, 2 * event.total)

    def ended(self, event: ReplayJob.Ended) -> None:
        """Show the report on the batch screen, or say the replay was cancelled or failed."""
        self.job = None
        self.status.hide_replay_status()
        if event.error is not None:
            self.host.say(event.error, error=True)
        elif event.report is not None:
            self.host.say(f"replayed {event.path}: {event.ran}/{event.total} requests, contaminated {event.contaminated}")
            self.show_report(event.report, event.path)
        elif event.ran >= 0:
            self.host.say(f"replay of {Path(event.path).name} cancelled: references {event.references}/{event.total}, "
                          f"replayed {event.ran}/{event.total}; no report")
