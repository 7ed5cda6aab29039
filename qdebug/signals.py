"""SIGTERM handled like Ctrl-C: `timeout`, `kill`, `docker stop` or a cancelled CI job stop a run cleanly (exit 143)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

# Set when SIGTERM arrives under terminate_as_interrupt: a library that swallows the KeyboardInterrupt and raises its
# own error instead (DuckDB's "Query interrupted") is turned back into the right one by `interruption`.
_TERMINATED = threading.Event()
_DEPTH = [0]  # contexts active now: the outermost one starts a run, with no SIGTERM seen yet


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
            _TERMINATED.set()
            raise Terminated()

    if not _DEPTH[0]:
        _TERMINATED.clear()  # a new run (a test process runs many): an earlier run's SIGTERM is not this one's
    previous = signal.signal(signal.SIGTERM, on_term)
    _DEPTH[0] += 1
    try:
        yield came
    finally:
        _DEPTH[0] -= 1
        signal.signal(signal.SIGTERM, previous)


def interruption() -> KeyboardInterrupt:
    """The exception a stop signal stands for: Terminated once SIGTERM came, else KeyboardInterrupt (Ctrl-C)."""
    return Terminated() if _TERMINATED.is_set() else KeyboardInterrupt()


def terminated_this_run() -> bool:
    """Whether SIGTERM came during the run in progress (a library may have turned it into its own error since); False
    outside one, so an earlier run's signal never makes a later error look like a stop."""
    return _DEPTH[0] > 0 and _TERMINATED.is_set()


def interrupt_exit_code(exc: BaseException | None = None) -> int:
    """143 after SIGTERM (the exception, or any SIGTERM this run), 130 after Ctrl-C: the README's exit codes."""
    return 143 if isinstance(exc, Terminated) or _TERMINATED.is_set() else 130


@contextmanager
def deferred() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM while a step that must not be cut runs (a C extension's import, which aborts the
    process when interrupted; renames that put an index in place); they are raised as usual right after it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []

    def hold(signum, frame) -> None:
        held.append(signum)

    previous = {s: signal.signal(s, hold) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if held:
            signal.raise_signal(held[0])  # its own handler runs now, as if it had just come
