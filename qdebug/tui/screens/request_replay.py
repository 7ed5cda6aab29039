"""The request screen's `replay FILE`: a ReplayJob in a worker, its progress on screen, Esc to cancel."""

from __future__ import annotations

from pathlib import Path

from textual import work

from qdebug.errors import describe

from ..messages import Notice, ReplayEnded, ReplayProgress
from ..replay_job import ReplayJob, progress_line
from ..widgets.replay_status import ReplayStatus


class ReplayControls:
    """Mixin for RequestScreen: start, follow and cancel one replay at a time."""

    replay_job: ReplayJob | None = None

    def start_replay(self, path: Path) -> None:
        """Replay a capture or read a runtime log; progress shows under the panels."""
        if self.replay_job is not None:
            self.say(f"a replay of {self.replay_job.path.name} is running (Esc cancels it first)", error=True)
            return
        self.replay_job = ReplayJob(path, self.post_message, loaded=self.loaded)
        model = "" if self.loaded is not None else " (loading the demo model first)"
        self.query_one(ReplayStatus).show(f"replaying {path.name}{model} · Esc cancels")
        self.say(f"replaying {path}{model}… Esc cancels")
        self._run_replay(self.replay_job)

    @work(thread=True, group="replay")
    def _run_replay(self, job: ReplayJob) -> None:
        try:
            job.run()
        except Exception as exc:  # QDebugError carries a one-line message
            self.post_message(ReplayEnded(str(job.path), None, -1, job.total))
            self.post_message(Notice(f"replay {job.path}: {describe(exc)}", error=True))

    def cancel_replay(self) -> bool:
        """Cancel the replay in progress, if any (Esc); True when there was one."""
        job = self.replay_job
        if job is None:
            return False
        if not job.cancelling:
            job.cancel()
            self.say(f"cancelling the replay of {job.path.name}: the requests in flight finish first…")
            self.query_one(ReplayStatus).show(f"cancelling the replay of {job.path.name}…")
        return True

    def on_replay_progress(self, event: ReplayProgress) -> None:
        """References, then replays: the bar counts both."""
        job = self.replay_job
        if job is None or job.cancelling:
            return
        line = progress_line(event, str(job.path))
        self.query_one(ReplayStatus).show(line, event.references + event.replayed, 2 * event.total)

    def on_replay_ended(self, event: ReplayEnded) -> None:
        """Show the report on the batch screen, or say the replay was cancelled."""
        self.replay_job = None
        self.query_one(ReplayStatus).hide()
        if event.report is not None:
            from .batch import BatchScreen

            self.say(f"replayed {event.path}: {event.ran}/{event.total} requests, contaminated {event.contaminated}")
            self.app.push_screen(BatchScreen(event.report, source=event.path))
        elif event.ran >= 0:
            self.say(f"replay of {Path(event.path).name} cancelled: references {event.references}/{event.total}, "
                     f"replayed {event.ran}/{event.total}; no report")
