"""Taps per thread: what a wrapped kernel consults on each call, so concurrent requests on one model see only their own."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class ThreadTaps:
    """The taps active on each thread, outermost first."""

    def __init__(self):
        self._local = threading.local()

    def active(self) -> tuple:
        """The calling thread's taps, outermost first (empty when none)."""
        return getattr(self._local, "taps", ())

    @contextmanager
    def pushed(self, taps: tuple) -> Iterator[None]:
        """Add `taps` innermost on the calling thread for the duration of the block."""
        stack = self.active()
        self._local.taps = stack + tuple(taps)
        try:
            yield
        finally:
            self._local.taps = stack
