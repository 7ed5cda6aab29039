"""ViewPanel: the base of the panels the request screen feeds a View; redraws only when its own part changed."""

from __future__ import annotations

from rich.segment import Segment
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from ..state import View
from .typeahead import FollowsFocus


class Lines:
    """Pre-rendered lines (lists of Segments) as a renderable."""

    def __init__(self, lines):
        self.lines = lines

    def __rich_console__(self, console, options):
        for line in self.lines:
            yield from line
            yield Segment.line()


class ViewPanel(FollowsFocus, Widget):
    """Set `view` to feed the panel; it repaints only when `view_key(view)` changes (moving between stages
    must not redraw a heatmap that did not change: that keeps key → frame latency low).

    Panels with PRERENDER keep their rendered lines per view and size, and `prefetch(view)` renders a view
    the user is likely to go to next while the app is idle: the key that goes there then costs a lookup."""

    can_focus = True  # Tab walks the panels; ? then explains the focused one
    view: reactive[View | None] = reactive(None, repaint=False)
    LAYOUT = False  # True for panels whose height follows their content
    PRERENDER = False

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._rendered: dict = {}

    def view_key(self, view: View) -> tuple:
        """What this panel's picture depends on (default: everything in the view)."""
        return (view.doc, view.sel, view.stage_status)

    def renderable(self, view: View):
        """The panel's picture for `view` (subclasses)."""
        return Text("")

    def watch_view(self, old: View | None, new: View | None) -> None:
        """Redraw when this panel's part of the view changed."""
        if old is None or new is None or self.view_key(old) != self.view_key(new):
            # a layout pass costs more than the panel itself: only when a new document may change its height
            self.refresh(layout=self.LAYOUT and (old is None or new is None or old.doc is not new.doc))

    def lines_for(self, view: View) -> list:
        """The rendered lines of `view` at the panel's size (cached)."""
        width, height = max(1, self.size.width), max(1, self.size.height)
        key = (self.view_key(view), width, height, self.app.no_color)
        lines = self._rendered.get(key)
        if lines is None:
            if len(self._rendered) > 64:
                self._rendered.clear()
            console = self.app.console
            lines = console.render_lines(self.renderable(view), console.options.update(width=width, height=None), pad=False)
            if not self.LAYOUT:  # a fixed box crops; a box that follows its content shows it all
                lines = lines[:height]
            self._rendered[key] = lines
        return lines

    def prefetch(self, view: View) -> None:
        """Render `view` now (idle time) so that showing it later is a lookup."""
        if self.PRERENDER and self.size.width and self.size.height:
            self.lines_for(view)

    def render(self):
        """The picture of the current view."""
        if self.view is None:
            return Text("")
        if self.PRERENDER and self.size.width:
            return Lines(self.lines_for(self.view))
        return self.renderable(self.view)
