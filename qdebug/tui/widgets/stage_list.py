"""StageList: the pipeline stages down the left, each with its status, breakpoint and failed-check mark."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import on
from textual.binding import Binding
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from qdebug.render.data_text import data

from ..state import StageRow
from .typeahead import FollowsFocus

_STATUS = {
    "pending": ("·", "dim", "pending"),
    "running": ("»", "yellow", "running"),
    "paused": ("▶", "bold black on yellow", "paused"),
    "done": ("✓", "green", "done"),
}


def row_text(row: StageRow) -> Text:
    """One stage as a line: breakpoint dot, status mark, name, status word, ✗ when a check failed or an error finding
    names the stage, ! for a warning finding."""
    mark, style, word = _STATUS[row.status]
    text = Text()
    text.append("●" if row.breakpoint else " ", style="bold red")
    text.append(f" {mark} ", style=style)
    text.append(data(f"{row.name:<10}", "bold" if row.status == "paused" else ("dim" if row.status == "pending" else "")))  # a trace's stage name
    if row.status != "done":
        text.append(f" {word}", style="dim" if row.status == "pending" else style)
    if row.failed:
        text.append(" ✗", style="bold red")
    elif row.warned:
        text.append(" !", style="bold yellow")
    return text


class StageList(FollowsFocus, OptionList, inherit_bindings=False):
    """The stage list; set `rows` to redraw, call `select(name)` to move the cursor. Posts StageHighlighted.

    ↑/↓ are left to the screen, which moves the cursor and redraws every panel in one handler (one frame per key).
    """

    @dataclass
    class StageHighlighted(Message):
        """The cursor moved to a stage."""

        stage: str

    BINDINGS = [
        Binding("end", "last", "Last", show=False),
        Binding("home", "first", "First", show=False),
        Binding("pagedown", "page_down", "Page Down", show=False),
        Binding("pageup", "page_up", "Page Up", show=False),
    ]

    rows: reactive[tuple[StageRow, ...]] = reactive((), always_update=False)

    def watch_rows(self, old: tuple[StageRow, ...], new: tuple[StageRow, ...]) -> None:
        """Redraw changed lines only; rebuild when the set of stages changed (keeping the cursor's stage)."""
        if [r.name for r in old] == [r.name for r in new] and len(old) == self.option_count:
            for i, (a, b) in enumerate(zip(old, new)):
                if a != b:
                    self.replace_option_prompt_at_index(i, row_text(b))
            return
        current = self.highlighted_option.id if self.highlighted_option is not None else None
        self.set_options([Option(row_text(r), id=r.name) for r in new])
        names = [r.name for r in new]
        if current in names:
            self.highlighted = names.index(current)
        elif names:
            self.highlighted = 0

    def select(self, name: str) -> None:
        """Move the cursor to stage `name` (if listed)."""
        names = [r.name for r in self.rows]
        if name in names and self.highlighted != names.index(name):
            self.highlighted = names.index(name)

    @property
    def current(self) -> str | None:
        """The stage under the cursor."""
        option = self.highlighted_option
        return option.id if option is not None else None

    @on(OptionList.OptionHighlighted)
    def _tell_stage(self, event: OptionList.OptionHighlighted) -> None:
        """Tell the screen which stage is selected."""
        event.stop()
        if event.option.id is not None:
            self.post_message(self.StageHighlighted(event.option.id))
