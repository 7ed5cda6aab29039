"""ReplayStatus: a replay's progress under the panels (references, replayed, contaminated so far), Esc cancels."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Label, ProgressBar


class ReplayStatus(Horizontal):
    """A label and a bar (references + replays) while `replay FILE` runs; hidden otherwise."""

    line = ""  # what the label says

    def on_mount(self) -> None:
        """Every line shown, oldest first."""
        self.lines: list[str] = []

    def compose(self) -> ComposeResult:
        """Label, then the bar."""
        yield Label("", id="replay-label")
        yield ProgressBar(total=None, show_eta=False, id="replay-bar")

    def show(self, line: str, done: int | None = None, total: int | None = None) -> None:
        """Show `line`; the bar counts `done` of `total` steps (indeterminate while the total is unknown)."""
        self.display = True
        self.line = line
        self.lines.append(line)
        self.query_one(Label).update(line)
        bar = self.query_one(ProgressBar)
        if total:
            bar.update(total=total, progress=done or 0)

    def hide(self) -> None:
        """The replay ended."""
        self.display = False
