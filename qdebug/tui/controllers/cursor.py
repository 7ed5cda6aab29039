"""Cursor: the request screen's moves over what is on screen: the stage list (↑/↓), the heatmap's layer and head
([ ] h), the query token and the token cursor (←/→, shift+←/→), the image (i), and the views one stage away."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Protocol

from ..state import Selection, StageRow, TraceDoc, View, query_move, stage_changes
from .prefetch import Panel


class CursorHost(Protocol):
    """What the cursor needs from the screen whose selection it moves."""

    doc: TraceDoc | None
    sel: Selection

    @property
    def num_layers(self) -> int | None:
        """Decoder layers of what is on screen."""

    @property
    def num_heads(self) -> int | None:
        """Attention heads per layer."""

    def view(self) -> View:
        """The View the panels draw."""

    def select(self, **changes) -> None:
        """Change the selection and redraw."""

    def select_stage(self, stage: str) -> None:
        """Select `stage` (and the layer or query it implies)."""


class Cursor:
    """Each key's move, made through the screen's `select`; `rows()` is the stage list as shown, `panels()` the panels."""

    def __init__(self, host: CursorHost, rows: Callable[[], Sequence[StageRow]], panels: Callable[[], Sequence[Panel]]):
        self.host = host
        self.rows = rows
        self.panels = panels

    def stage(self, delta: int) -> None:
        """Move the stage cursor `delta` rows (clamped to the list)."""
        names = [r.name for r in self.rows()]
        if not names:
            return
        sel = self.host.sel
        index = names.index(sel.stage) + delta if sel.stage in names else 0
        self.host.select_stage(names[max(0, min(len(names) - 1, index))])

    def layer(self, delta: int) -> None:
        """Heatmap layer: mean → 0 → … → N-1 (and back)."""
        cycle = [None, *range(self.host.num_layers or 0)]
        self.host.select(layer=cycle[(cycle.index(self.host.sel.layer) + delta) % len(cycle)])

    def head(self) -> None:
        """Heatmap head: mean → 0 → 1 … → mean."""
        cycle = [None, *range(self.host.num_heads or 0)]
        self.host.select(head=cycle[(cycle.index(self.host.sel.head) + 1) % len(cycle)])

    def query(self, delta: int) -> None:
        """Move the query token (text prompt tokens, then one per generated step)."""
        doc = self.host.doc
        if doc is not None:
            self.host.select(pos=query_move(doc, self.host.view().pos_on(doc), delta))

    def token(self, delta: int) -> None:
        """Move the cursor one token (image tokens included)."""
        doc = self.host.doc
        if doc is not None:
            self.host.select(pos=max(0, min(doc.length - 1, self.host.view().pos_on(doc) + delta)))

    def image(self) -> None:
        """The next image's heatmap."""
        doc = self.host.doc
        if doc is not None and doc.trace.images:
            self.host.select(image=(self.host.sel.image + 1) % len(doc.trace.images))

    def neighbour_views(self) -> list[tuple[Panel, View]]:
        """Each panel with the view of the stage after, then before, the selected one (for the prefetcher)."""
        rows = self.rows()
        names = [r.name for r in rows]
        doc, sel = self.host.doc, self.host.sel
        if doc is None or sel.stage not in names:
            return []
        i = names.index(sel.stage)
        panels = list(self.panels())
        here = self.host.view()
        jobs: list[tuple[Panel, View]] = []
        for j in (i + 1, i - 1):  # ↓ is the usual direction: first
            if 0 <= j < len(names):
                view = replace(here, sel=replace(sel, **stage_changes(names[j], doc)), stage_status=rows[j].status)
                jobs.extend((panel, view) for panel in panels)
        return jobs
