"""TimelinePictureScreen: the offset-timeline PNG (the same picture `--timeline-png` writes), shown in the terminal."""

from __future__ import annotations

import tempfile
from pathlib import Path

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Static


def render_picture(report):
    """The offset timeline drawn to a PNG and read back as a PIL image."""
    from PIL import Image

    from qdebug.render.offset_timeline import draw_timeline

    with tempfile.TemporaryDirectory() as tmp:
        path = draw_timeline(report, Path(tmp) / "timeline.png")
        with Image.open(path) as im:
            return im.convert("RGB")


class TimelinePictureScreen(Screen):
    """The batch's offset timeline as a picture; Escape goes back."""

    BINDINGS = [Binding("escape", "app.pop_screen", "back"), Binding("q", "app.pop_screen", "back", show=False)]
    DEFAULT_CSS = "TimelinePictureScreen #picture { width: 100%; height: 1fr; }"

    def __init__(self, report, **kwargs):
        super().__init__(**kwargs)
        self.report = report
        self.picture = None

    def compose(self) -> ComposeResult:
        """A status line, then the picture once drawn."""
        yield Static("drawing the offset timeline…", id="picture-status")
        yield Footer()

    def on_mount(self) -> None:
        """Draw off the UI thread (matplotlib takes a moment)."""
        self._draw()

    @work(thread=True, group="picture")
    def _draw(self) -> None:
        image = render_picture(self.report)
        self.app.call_from_thread(self._show, image)

    def _show(self, image) -> None:
        from textual_image.widget import HalfcellImage, Image

        self.picture = image
        widget_type = Image if self.app.is_headless is False else HalfcellImage  # tests: a renderer that needs no terminal
        self.query_one("#picture-status", Static).update(
            f"offset timeline of {self.report.source} ({image.width}×{image.height} px; `--timeline-png` writes the same picture)")
        self.mount(widget_type(image, id="picture"), before=self.query_one(Footer))
