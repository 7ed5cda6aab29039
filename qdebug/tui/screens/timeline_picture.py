"""TimelinePictureScreen: the offset-timeline PNG (the same picture `--timeline-png` writes), shown in the terminal
where it shows pixels (Sixel, Kitty); elsewhere the same timeline as text, lanes and glyphs as the Rich report draws
it (a PNG in half blocks turns its labels into smudges)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
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
        """A status line, then the picture once drawn (or, without pixels, the timeline as text)."""
        if self.app.pixels is None:
            yield Static(self._as_text_note(), id="picture-status")
            with VerticalScroll(id="timeline-text"):
                yield Static(self._as_text(), id="timeline-lanes")
        else:
            yield Static("drawing the offset timeline…", id="picture-status")
        yield Footer()

    def on_mount(self) -> None:
        """Draw off the UI thread (matplotlib takes a moment); text needs no drawing."""
        if self.app.pixels is not None:
            self._draw()

    def _as_text_note(self) -> str:
        return (f"offset timeline of {self.report.source}, as text: this terminal shows no pixels (Sixel or Kitty graphics); "
                "`qdebug replay … --timeline-png FILE` writes the picture")

    def _as_text(self):
        """The lanes on one time axis (as the batch screen draws them), then each request's events with offsets and
        donors (as `qdebug replay` prints them)."""
        from rich.console import Group

        from qdebug.render.replay_tables import timeline_table

        from ..widgets.event_timeline import timeline_text

        lanes = timeline_text(self.report, max(60, self.app.size.width - 2), None, listed=False)
        return Group(lanes, timeline_table(self.report))

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
