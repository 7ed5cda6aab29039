"""SIGTERM handled like Ctrl-C: `timeout`, `kill`, `docker stop` or a cancelled CI job stop a run cleanly (exit 143)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Terminated(KeyboardInterrupt):
    """Raised in the main thread when SIGTERM arrives; code that stops cleanly on Ctrl-C stops on it too."""


@contextmanager
def terminate_as_interrupt() -> Iterator[threading.Event]:
    """While active, SIGTERM raises Terminated in the main thread; the yielded event says whether it came."""
    came = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield came  # signal handlers can only be installed from the main thread
        return

    def on_term(signum, frame):
        if not came.is_set():
            came.set()
            raise Terminated()

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield came
    finally:
        signal.signal(signal.SIGTERM, previous)
