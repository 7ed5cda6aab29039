"""Prefetcher: while the app is idle, render the panels of the stages next to the selected one, so that the key
that goes there costs a lookup (one panel per idle turn: keys pressed meanwhile go first)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from ..state import View


class Panel(Protocol):
    """A panel that can render a view ahead of time."""

    def prefetch(self, view: View) -> None:
        """Render `view` now so that showing it later is a lookup."""


class PrefetchHost(Protocol):
    """What the prefetcher needs from the screen whose panels it fills."""

    @property
    def is_current(self) -> bool:
        """Whether the screen is the one on top."""

    def call_after_refresh(self, callback: Callable, *args) -> bool:
        """Call `callback` once the next frame is out."""

    def call_later(self, callback: Callable, *args) -> bool:
        """Call `callback` on a later turn of the message loop."""


class Prefetcher:
    """`schedule()` after each redraw; the work starts once the frame is out and stops when the screen is left.
    `neighbours()`: (panel, view) pairs to render: each panel for the stages after and before the selected one."""

    def __init__(self, host: PrefetchHost, neighbours: Callable[[], Sequence[tuple[Panel, View]]]):
        self.host = host
        self.neighbours = neighbours
        self._pending = False

    def schedule(self) -> None:
        """Once the frame is out, render the neighbouring stages' panels."""
        if not self._pending:
            self._pending = True
            self.host.call_after_refresh(self._start)

    def _start(self) -> None:
        self._pending = False
        jobs = list(self.neighbours())

        def step() -> None:
            if jobs and self.host.is_current:
                panel, view = jobs.pop(0)
                panel.prefetch(view)
                self.host.call_later(step)  # yield to pending keys between panels

        step()
