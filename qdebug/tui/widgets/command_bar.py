"""CommandBar: the REPL line at the bottom, with history (↑/↓) and Tab completion; Enter returns to the main view."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from textual import on
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Input

from ..command_language import CommandSuggester
from .typeahead import pass_on


class CommandBar(Input):
    """A command input: Enter posts CommandBar.Entered, ↑/↓ walk the history, Tab accepts the completion."""

    @dataclass
    class Entered(Message):
        """The user submitted a command line."""

        line: str

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
        self._away = False  # Enter was pressed: keys still queued here were typed for the main view

    async def action_submit(self) -> None:
        """Run the line now, not when a Submitted message comes round: a key typed right after Enter is
        already queued to this bar, and must step the run instead of landing in the next command."""
        self._away = True
        self.action_leave()
        self.post_message(self.Submitted(self, self.value))

    async def _on_key(self, event) -> None:
        # Enter is handled here, not as a binding: bindings run after the keys already queued behind it
        if self._away and pass_on(self, event):  # typed ahead after Enter: the key is the main view's
            return
        if event.key == "enter":
            event.prevent_default()
            event.stop()
            await self.action_submit()
            return
        # anything else: Textual goes on to the base classes' key handlers

    def on_focus(self) -> None:
        """Typing here again."""
        self._away = False

    @on(Input.Submitted)
    def _send_line(self, event: Input.Submitted) -> None:
        """Send the line up and remember it."""
        event.stop()
        line = event.value.strip()
        # Enter ran the line and handed the keys back to the main view (vim, lazygit): the next `n` steps
        if not line:
            return
        if not self.history or self.history[-1] != line:
            self.history.append(line)
        self._index = len(self.history)
        self.value = ""
        self.post_message(self.Entered(line))

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
        """Give the focus back to the screen's main widget (at once: keys already queued follow it)."""
        for selector in ("#stages", "#requests"):
            found = self.screen.query(selector)
            if found:
                self.screen.set_focus(found.first())
                return
