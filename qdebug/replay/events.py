"""EventLog: a thread-safe, ordered log of replay Events, fed by the recorders' `notify` callbacks."""

from __future__ import annotations

import threading
import time

from qdebug.vocab import EventKind

from .batch import Event


class EventLog:
    """Collects Events from many worker threads with a shared clock (seconds since the log started)."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._lock = threading.Lock()
        self._t0 = time.perf_counter()

    def add(self, kind: str, request_id: str | None, **fields) -> Event:
        """Append one event stamped with the time and a global sequence number."""
        with self._lock:
            event = Event(kind=kind, request_id=request_id, t=round(time.perf_counter() - self._t0, 6), seq=len(self.events), **fields)
            self.events.append(event)
            return event

    def notifier(self, request_id: str):
        """A `notify(kind, **fields)` callback for one request's recorder.

        An overwrite is logged against its victim (the request whose waiting rows were overwritten) with the
        writer as donor, as the runtime log does.
        """

        def notify(kind: str, **fields) -> None:
            victim = fields.pop("victim", None)
            if kind == EventKind.BUFFER_OVERWRITE and victim is not None:
                self.add(kind, victim, donor=request_id, **fields)
            else:
                self.add(kind, request_id, **fields)

        return notify
