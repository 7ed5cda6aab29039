"""EventLog: a thread-safe, ordered log of replay Events, fed per request by the recorder and the faults."""

from __future__ import annotations

import threading
import time

from qdebug.trace.protocols import PipelineListener
from qdebug.vocab import EventKind

from .batch import Event


class EventLog:
    """Collects Events from many worker threads with a shared clock (seconds since the log started)."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._lock = threading.Lock()
        self._t0 = time.perf_counter()

    def add(self, kind: EventKind | str, request_id: str | None, **fields) -> Event:
        """Append one event stamped with the time and a global sequence number; `kind` may be given by its name
        ("desync"), a name outside EventKind is refused (ValueError), as Event itself refuses it."""
        with self._lock:
            event = Event(kind=EventKind(kind), request_id=request_id, t=round(time.perf_counter() - self._t0, 6), seq=len(self.events), **fields)
            self.events.append(event)
            return event

    def for_request(self, request_id: str) -> RequestEvents:
        """One request's view of this log: its recorder's PipelineListener and its faults' event sink."""
        return RequestEvents(self, request_id)


class RequestEvents(PipelineListener):
    """Logs one request's events: the recorder's pipeline moments, and what its faults report (`events(kind, **fields)`).

    An overwrite is logged against its victim (the request whose waiting rows were overwritten) with the writer as
    donor, as the runtime log does.
    """

    def __init__(self, log: EventLog, request_id: str) -> None:
        self.log, self.request_id = log, request_id

    def __call__(self, kind: EventKind | str, **fields) -> None:
        """Log one event of this request (or, for an overwrite, of its victim)."""
        victim = fields.pop("victim", None)
        if kind == EventKind.BUFFER_OVERWRITE and victim is not None:
            self.log.add(kind, victim, donor=self.request_id, **fields)
        else:
            self.log.add(kind, self.request_id, **fields)

    def encode_started(self) -> None:
        """The request's images started encoding."""
        self(EventKind.ENCODE_START)

    def rows_synced(self, offset: int | None, tokens: int) -> None:
        """The sync step placed the request's visual rows."""
        self(EventKind.SYNC, offset=offset, tokens=tokens)

    def first_token(self) -> None:
        """The request's first token is out."""
        self(EventKind.FIRST_TOKEN)
