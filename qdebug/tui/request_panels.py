"""The request screen's panels: top-k, offsets, the heatmap (with its image in real pixels) and the footer, mounted
after the first frame; the info line; the replay's progress bar; and the screen as SVG, titled with the info line."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.text import Text
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Static

from .state import StageRow, View
from .widgets.model_status import ModelStatus
from .widgets.stage_list import StageList
from .widgets.view_panel import ViewPanel


class RequestPanels:
    """What `screen` shows of the view beyond the stage list; `redraw()` pushes the view once the panels are mounted."""

    def __init__(self, screen: Screen, redraw: Callable[[], None]):
        self.screen = screen
        self.redraw = redraw
        self.mounted: bool | None = False  # top-k, offsets, heatmap and footer (None: mounting; after the first frame)
        self.info_plain: str | None = None  # the info line as shown
        self._pixels_key: tuple | None = None

    def stage_rows(self) -> Sequence[StageRow]:
        """The stage list's rows, as shown."""
        return self.screen.query_one(StageList).rows

    def views(self) -> list[ViewPanel]:
        """Every panel on the screen that draws the view, whichever the layout composed."""
        return list(self.screen.query(ViewPanel))

    async def mount(self, pixels: str | None) -> None:
        """Top-k, offsets, the heatmap and the key footer, mounted right after the first frame (laying out and
        drawing them before it cost ~20 ms of it: benchmarks/tui.py); then the current view is pushed to them.
        Keys pressed meanwhile reach the stage list, which is there from the start. `pixels`: the app's."""
        if self.mounted is not False:
            return
        self.mounted = None  # mounting
        from textual.widgets import Footer

        # imported here: the first frame does not wait for modules it does not draw (benchmarks/tui.py)
        from .widgets.attention_view import AttentionView
        from .widgets.offset_strip import OffsetTimeline
        from .widgets.topk_panel import TopKPanel

        screen = self.screen
        topk, timeline, attention = TopKPanel(id="topk"), OffsetTimeline(id="timeline"), AttentionView(id="attention")
        topk.border_title, timeline.border_title, attention.border_title = "top-k", "offsets", "attention"
        right = screen.query_one("#right")
        mounts = [screen.query_one("#upper").mount(topk), right.mount(timeline)]
        if pixels:  # the image with its attention overlay, in real pixels
            from .pixels import image_widget

            attention.pixels = True
            mounts.append(right.mount(Horizontal(attention, image_widget(pixels, id="pixels"), id="attention-row")))
        else:
            mounts.append(right.mount(attention))
        if not screen.query("#replay-status"):  # hidden until a replay runs
            mounts.append(screen.mount(self._new_replay_status(), before="#message"))
        mounts.append(screen.mount(Footer()))
        for mounted in mounts:
            await mounted
        for status in screen.query(ModelStatus):
            status.add_bar()
        self.mounted = True
        self.redraw()

    def show(self, view: View, info: Text, pixels: str | None) -> None:
        """Push `view` to every panel, the image in real pixels (`pixels`: the app's) and the info line."""
        for panel in self.screen.query(ViewPanel):
            panel.view = view
        if pixels and self.mounted is True:
            self._show_pixels(view)
        if info.plain != self.info_plain:  # an unchanged line must not cost a layout pass
            self.info_plain = info.plain
            self.screen.query_one("#info", Static).update(info)

    def _show_pixels(self, view: View) -> None:
        """Give the pixel widget the image with the selection's attention over it (when that changed)."""
        from .widgets.attention_view import overlay_for

        key = self.screen.query_one("#attention", ViewPanel).view_key(view)
        if key != self._pixels_key:
            self._pixels_key = key
            widget: Any = self.screen.query_one("#pixels")  # a textual-image widget (the package has no type information)
            image = overlay_for(view)
            widget.image = image
            widget.display = image is not None

    def show_replay_status(self, line: str, done: int | None = None, total: int | None = None) -> None:
        """A replay's progress under the panels."""
        from .widgets.replay_status import ReplayStatus

        found = self.screen.query("#replay-status")
        if found:
            found.first(ReplayStatus).show(line, done, total)
        else:  # a replay started before the panels mounted
            status = self._new_replay_status()
            self.screen.mount(status, before="#message")
            status.call_after_refresh(status.show, line, done, total)

    def hide_replay_status(self) -> None:
        """The replay ended."""
        from .widgets.replay_status import ReplayStatus

        for status in self.screen.query("#replay-status").results(ReplayStatus):
            status.hide()

    @staticmethod
    def _new_replay_status():
        from .widgets.replay_status import ReplayStatus

        return ReplayStatus(id="replay-status")

    def screenshot(self) -> str:
        """The screen exactly as it is now, as SVG (Textual's screenshot), titled with the info line."""
        return self.screen.app.export_screenshot(title=f"qdebug · {self.info_plain or 'request'}")
