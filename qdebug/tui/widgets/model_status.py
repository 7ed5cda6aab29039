"""ModelStatus: what model is loading, with an indeterminate progress bar, hidden once it is ready."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Static

from qdebug.render.data_text import data


class ModelStatus(Horizontal):
    """A label and a pulsing bar while the model loads in its worker (the bar joins right after the first frame,
    which it would otherwise delay by its mount)."""

    def __init__(self, text: str, **kwargs):
        super().__init__(**kwargs)
        self._text = text

    def compose(self) -> ComposeResult:
        """The label (the bar follows once the first frame is out)."""
        yield Static(data(self._text), id="model-label")  # a Static, not a Label: a new widget class re-parses the stylesheet before the first frame

    def on_mount(self) -> None:
        """Add the pulsing bar after the first frame (the app's Ready: the request screen calls `add_bar` then)."""
        if getattr(self.app, "first_frame_at", 0) is not None:
            self.call_after_refresh(self.add_bar)

    def add_bar(self) -> None:
        """The pulsing bar, unless the model is already settled (hidden) or the bar is there."""
        from textual.widgets import ProgressBar

        if self.is_attached and self.display and not self.query("#model-bar"):
            self.mount(ProgressBar(total=None, show_eta=False, show_percentage=False, id="model-bar"))

    def done(self) -> None:
        """Hide: the model is ready (or failed; the message line says which)."""
        self.display = False
