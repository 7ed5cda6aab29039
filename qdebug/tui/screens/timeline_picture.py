"""TimelinePictureScreen: the offset-timeline PNG (the same picture `--timeline-png` writes), shown in the terminal
where it shows pixels (Sixel, Kitty); elsewhere the same timeline as text, lanes and glyphs as the Rich report draws
it (a PNG in half blocks turns its labels into smudges), a page of events at a time for a large log.

Drawing runs in a worker thread that reports with messages (a progress bar meanwhile); keys pressed before the
drawing is on screen are kept and acted on, in order, once it is (Escape and q go back at once).
"""

from __future__ import annotations

import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, ProgressBar, Static

from qdebug.render.data_text import data

from ..page_keys import PAGE_BINDINGS
from ..timeline_page import TimelinePage, build_page, is_small
from ..widgets.prerendered import PrerenderedLines, render_lines

if TYPE_CHECKING:
    from textual import getters

    from ..app_type import QDebugAppType

AT_ONCE = ("escape", "q", "ctrl+q")  # keys that need nothing drawn: acted on while the drawing runs


def render_picture(report):
    """The offset timeline drawn to a PNG and read back as a PIL image."""
    from PIL import Image

    from qdebug.render.offset_timeline import draw_timeline

    with tempfile.TemporaryDirectory() as tmp:
        path = draw_timeline(report, Path(tmp) / "timeline.png")
        with Image.open(path) as im:
            return im.convert("RGB")


class TimelinePictureScreen(Screen):
    """The batch's offset timeline as a picture (or text, paged); Escape goes back."""

    if TYPE_CHECKING:  # qdebug's app (tui/app_type.py)
        app = getters.app(QDebugAppType)

    BINDINGS = [
        Binding("escape", "back", "back"),
        Binding("q", "back", "back", show=False),
        *PAGE_BINDINGS,
    ]
    DEFAULT_CSS = """
    TimelinePictureScreen #picture { width: 100%; height: 1fr; }
    TimelinePictureScreen #picture-progress { height: 1; }
    """

    @dataclass
    class Step(Message):
        """The drawing moved on: step `done` of `total`, doing `what`."""

        done: int
        total: int
        what: str

    @dataclass
    class PageDrawn(Message):
        """A page of the timeline as text is ready, rendered to `lines` at `width` (page None: cancelled)."""

        page: TimelinePage | None
        lines: list
        width: int

    @dataclass
    class PictureDrawn(Message):
        """The PNG is drawn and read back (or why not)."""

        image: object | None
        error: str | None = None

    def __init__(self, report, **kwargs):
        super().__init__(**kwargs)
        self.report = report
        self.picture = None
        self.page = 0
        self.pages = 1
        self.busy = True  # nothing drawn on screen yet (a worker draws): keys that need the drawing wait in `waiting`
        self.waiting: list[str] = []
        self._cancel = threading.Event()

    def compose(self) -> ComposeResult:
        """A status line, a progress bar while drawing, then the picture (or, without pixels, the timeline as text)."""
        small = self.app.pixels is None and is_small(self.report)
        first = build_page(self.report, 0, self._width()) if small else None  # a few ms: no worker, no bar
        if self.app.pixels is None:
            yield Static(data(self._as_text_note()), id="picture-status")
            yield Static(data(first.heading) if first else "", id="timeline-heading")
        else:
            yield Static("drawing the offset timeline…", id="picture-status")
        yield ProgressBar(total=None, show_eta=False, id="picture-progress")
        if first is not None:
            with VerticalScroll(id="timeline-text"):
                yield Static(first.body, id="timeline-lanes")
        elif self.app.pixels is None:  # a page at a time, rendered in the worker: a frame draws only what shows
            yield PrerenderedLines(id="timeline-lines")
        yield Footer()
        if first is not None:
            self.pages = first.pages

    async def on_mount(self) -> None:
        """Start drawing off the UI thread (matplotlib, or a large log's page of lanes, takes a while)."""
        if self.app.pixels is not None:
            self._start(self._draw)
        elif not is_small(self.report):
            self._start(lambda: self._draw_page(0))
        else:  # drawn in compose
            await self._done()

    def _width(self) -> int:
        return max(60, self.app.size.width - 2)

    def _as_text_note(self) -> str:
        return (f"offset timeline of {self.report.source}, as text: this terminal shows no pixels (Sixel or Kitty graphics); "
                "`qdebug replay … --timeline-png FILE` writes the picture")

    # the drawing, in a worker ----------------------------------------------------------------------------------
    def _start(self, draw) -> None:
        self.busy = True
        bar = self.query_one("#picture-progress", ProgressBar)
        bar.display = True
        bar.update(total=None, progress=0)
        draw()

    @work(thread=True, exclusive=True, group="picture")
    def _draw_page(self, page: int) -> None:
        """Build one page of lanes and render it (4 steps), then hand it up."""
        done = [0]

        def step(what: str) -> None:
            done[0] += 1
            self.post_message(self.Step(done[0], 4, what))

        width = self._width()
        result = build_page(self.report, page, width, step=step, cancelled=self._cancel.is_set)
        if result is None or self._cancel.is_set():
            self.post_message(self.PageDrawn(None, [], width))
            return
        step("rendering")
        self.post_message(self.PageDrawn(result, render_lines(result.body, width), width))

    @work(thread=True, exclusive=True, group="picture")
    def _draw(self) -> None:
        """Draw the PNG (the picture `--timeline-png` writes) and read it back."""
        self.post_message(self.Step(1, 2, "drawing the picture"))
        try:
            image = render_picture(self.report)
        except Exception as exc:  # one line, on the screen: the batch screen stays usable
            from qdebug.errors import describe

            self.post_message(self.PictureDrawn(None, describe(exc)))
            return
        self.post_message(self.PictureDrawn(image))

    # back on the UI thread -------------------------------------------------------------------------------------
    @on(Step)
    def _show_step(self, event: Step) -> None:
        self.query_one("#picture-progress", ProgressBar).update(total=event.total, progress=event.done - 1)
        if self.app.pixels is not None:
            self.query_one("#picture-status", Static).update(data(f"{event.what}… ({event.done}/{event.total}) · Escape goes back"))

    @on(PageDrawn)
    async def _show_page(self, event: PageDrawn) -> None:
        if event.page is None:
            return
        page = event.page
        self.page, self.pages = page.page, page.pages
        self.query_one("#timeline-heading", Static).update(data(page.heading))
        self.query_one(PrerenderedLines).show(event.lines, event.width)
        await self._done()

    @on(PictureDrawn)
    async def _show_picture(self, event: PictureDrawn) -> None:
        if event.image is None:
            self.query_one("#picture-status", Static).update(data(f"the offset timeline could not be drawn: {event.error}"))
        else:
            self._show(event.image)
        await self._done()

    def _show(self, image) -> None:
        from textual_image.widget import HalfcellImage, Image

        self.picture = image
        widget_type = Image if self.app.is_headless is False else HalfcellImage  # tests: a renderer that needs no terminal
        self.query_one("#picture-status", Static).update(
            data(f"offset timeline of {self.report.source} ({image.width}×{image.height} px; `--timeline-png` writes the same picture)"))
        self.mount(widget_type(image, id="picture"), before=self.query_one(Footer))

    async def _done(self) -> None:
        """The drawing is on screen: hide the bar, then act on the keys pressed meanwhile, in order (a key that
        starts another drawing, a page move, leaves the rest waiting for that one)."""
        self.busy = False
        self.query_one("#picture-progress").display = False
        while self.waiting and not self.busy:
            bound = self.active_bindings.get(self.waiting.pop(0))
            if bound is not None and bound.enabled:
                await self.app.run_action(bound.binding.action, bound.node)

    def on_key(self, event: events.Key) -> None:
        """While drawing, keep the keys that need the drawing (scrolling, paging) for when it is on screen."""
        if (self.busy or self.waiting) and event.key not in AT_ONCE:
            self.waiting.append(event.key)
            event.stop()
            event.prevent_default()

    # keys --------------------------------------------------------------------------------------------------------
    def action_back(self) -> None:
        """Back to the batch screen; a drawing in progress is dropped."""
        self._cancel.set()
        self.app.pop_screen()

    def action_page(self, where: str) -> None:
        """Next / previous / first / last page of the timeline as text (a large log's events)."""
        if self.app.pixels is not None:
            return
        target = {"next": self.page + 1, "previous": self.page - 1, "first": 0, "last": self.pages - 1}[where]
        target = min(max(0, target), self.pages - 1)
        if target != self.page:
            self._start(lambda: self._draw_page(target))
