"""ModelStatus: what model is loading, with an indeterminate progress bar, hidden once it is ready."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Label, ProgressBar


class ModelStatus(Horizontal):
    """A label and a pulsing bar while the model loads in its worker."""

    def __init__(self, text: str, **kwargs):
        super().__init__(**kwargs)
        self._text = text

    def compose(self) -> ComposeResult:
        """Label, then the bar."""
        yield Label(self._text, id="model-label")
        yield ProgressBar(total=None, show_eta=False, show_percentage=False, id="model-bar")

    def done(self) -> None:
        """Hide: the model is ready (or failed; the message line says which)."""
        self.display = False
