"""MessageLine: the one line above the command bar for results and inline errors (never a crash)."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget


class MessageLine(Widget):
    """The last notice; errors in red. Set `message` to (text, is_error)."""

    message: reactive[tuple[str, bool]] = reactive(("", False))

    def say(self, text: str, error: bool = False) -> None:
        """Show a line (an error when `error`)."""
        self.message = (text, error)

    def render(self):
        """Draw the message."""
        text, error = self.message
        if error:
            return Text("✗ " + text, style="bold red")
        return Text(text, style="italic")
