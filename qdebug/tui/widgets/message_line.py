"""MessageLine: the one line above the command bar for results and inline errors (never a crash)."""

from __future__ import annotations

from textual.reactive import reactive
from textual.widget import Widget

from qdebug.render.data_text import data


class MessageLine(Widget):
    """The last notice; errors in red. Set `message` to (text, is_error)."""

    message: reactive[tuple[str, bool]] = reactive(("", False))

    def say(self, text: str, error: bool = False) -> None:
        """Show a line (an error when `error`)."""
        self.message = (text, error)

    def render(self):
        """Draw the message."""
        text, error = self.message  # often quotes a file, a server or a trace: data, never markup
        if error:
            return data("✗ " + text, "bold red")
        return data(text, "italic")
