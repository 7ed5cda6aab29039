"""ViewPanel: the base of the panels the request screen feeds a View; redraws only when its own part changed."""

from __future__ import annotations

from textual.reactive import reactive
from textual.widget import Widget

from ..state import View


class ViewPanel(Widget):
    """Set `view` to feed the panel; it repaints only when `view_key(view)` changes (moving between stages
    must not redraw a heatmap that did not change: that keeps key → frame latency low)."""

    view: reactive[View | None] = reactive(None, repaint=False)
    LAYOUT = False  # True for panels whose height follows their content

    def view_key(self, view: View) -> tuple:
        """What this panel's picture depends on (default: everything in the view)."""
        return (view.doc, view.sel, view.stage_status)

    def watch_view(self, old: View | None, new: View | None) -> None:
        """Redraw when this panel's part of the view changed."""
        if old is None or new is None or self.view_key(old) != self.view_key(new):
            # a layout pass costs more than the panel itself: only when a new document may change its height
            self.refresh(layout=self.LAYOUT and (old is None or new is None or old.doc is not new.doc))
