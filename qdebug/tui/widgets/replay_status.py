"""ReplayStatus: a replay's progress under the panels (references, replayed, contaminated so far), Esc cancels."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Label

from qdebug.render.data_text import data


class ReplayStatus(Horizontal):
    """A label and a bar (references + replays) while `replay FILE` runs; hidden otherwise. The bar is made when a
    replay first shows: a hidden ProgressBar would only cost the first frame its mount."""

    line = ""  # what the label says

    def on_mount(self) -> None:
        """Every line shown, oldest first."""
        self.lines: list[str] = []

    def compose(self) -> ComposeResult:
        """The label; the bar comes with the first replay."""
        yield Label("", id="replay-label")

    def show(self, line: str, done: int | None = None, total: int | None = None) -> None:
        """Show `line`; the bar counts `done` of `total` steps (indeterminate while the total is unknown)."""
        from textual.widgets import ProgressBar

        self.display = True
        self.line = line
        self.lines.append(line)
        self.query_one(Label).update(data(line))
        bars = self.query(ProgressBar)
        bar = bars.first() if bars else None
        if bar is None:
            bar = ProgressBar(total=None, show_eta=False, id="replay-bar")
            self.mount(bar)
        if total:
            bar.update(total=total, progress=done or 0)

    def hide(self) -> None:
        """The replay ended."""
        self.display = False
