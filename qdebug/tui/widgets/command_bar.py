"""CommandBar: the REPL line at the bottom, with history (↑/↓) and Tab completion; Enter returns to the main view."""

from __future__ import annotations

from collections.abc import Callable

from textual.binding import Binding
from textual.widgets import Input

from ..commands import CommandSuggester
from ..messages import CommandEntered


class CommandBar(Input):
    """A command input: Enter posts CommandEntered, ↑/↓ walk the history, Tab accepts the completion."""

    BINDINGS = [
        Binding("up", "history(-1)", "Previous command", show=False),
        Binding("down", "history(1)", "Next command", show=False),
        Binding("tab", "complete", "Complete", show=False),
        Binding("escape", "leave", "Leave the command bar", show=False),
    ]

    def __init__(self, stages: Callable[[], list[str]], **kwargs):
        super().__init__(placeholder=": command (help lists them; Tab completes, ↑/↓ history)", suggester=CommandSuggester(stages),
                         select_on_focus=False, **kwargs)  # a line filled in (palette) is continued, not replaced
        self.history: list[str] = []
        self._index = 0  # position in history while browsing; len(history) = the line being typed
        self._draft = ""

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Send the line up and remember it."""
        event.stop()
        line = event.value.strip()
        # Enter runs the line and hands the keys back to the main view (vim, lazygit): the next `n` steps
        self.action_leave()
        if not line:
            return
        if not self.history or self.history[-1] != line:
            self.history.append(line)
        self._index = len(self.history)
        self.value = ""
        self.post_message(CommandEntered(line))

    def action_history(self, delta: int) -> None:
        """Replace the line with an older (-1) or newer (+1) command."""
        if not self.history:
            return
        if self._index == len(self.history):
            self._draft = self.value
        self._index = max(0, min(len(self.history), self._index + delta))
        self.value = self.history[self._index] if self._index < len(self.history) else self._draft
        self.cursor_position = len(self.value)

    def action_complete(self) -> None:
        """Accept the inline completion, if any (Tab never leaves the bar)."""
        if self._suggestion and self._suggestion != self.value:
            self.value = self._suggestion
            self.cursor_position = len(self.value)

    def action_leave(self) -> None:
        """Give the focus back to the screen's main widget."""
        for selector in ("#stages", "#requests"):
            found = self.screen.query(selector)
            if found:
                found.first().focus()
                return
