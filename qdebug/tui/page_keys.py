"""The keys that page a report's events, shared by every screen that pages them (the batch screen, the timeline)."""

from __future__ import annotations

from textual.binding import Binding

PAGE_BINDINGS = [
    Binding("right_square_bracket", "page('next')", "next events", show=False),
    Binding("left_square_bracket", "page('previous')", "previous events", show=False),
    Binding("right_curly_bracket", "page('last')", "last events", show=False),
    Binding("left_curly_bracket", "page('first')", "first events", show=False),
]
