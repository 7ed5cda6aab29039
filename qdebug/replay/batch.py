"""Batch and Event: the one model that captures and runtime logs both become."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from qdebug.vocab import EventKind, EventOrigin

if TYPE_CHECKING:
    from qdebug.trace.request import Request


@dataclass(slots=True)
class Event:
    """One thing that happened to one request at one time.

    `t` is seconds (absolute or relative; None when the source has no clock: then `seq` orders events).
    `offset` is the buffer/visual token offset; `text_offset` the textual offset for desyncs;
    `tokens` a token count; `donor` the request whose data overwrote this one (overwrites);
    `line` the 1-based source line (None for replays); `origin` says whether a fault reported it about itself (a
    label, never evidence).
    """

    kind: EventKind
    request_id: str | None
    t: float | None = None
    seq: int = 0
    offset: int | None = None
    text_offset: int | None = None
    tokens: int | None = None
    donor: str | None = None
    line: int | None = None
    message: str = ""
    origin: EventOrigin = EventOrigin.OBSERVED

    def __post_init__(self) -> None:
        # a kind outside the vocabulary is refused where the event is made (the type test first: a log's report makes
        # thousands of events, and an Enum call costs microseconds)
        if type(self.kind) is not EventKind:
            self.kind = EventKind(self.kind)
        if type(self.origin) is not EventOrigin:
            self.origin = EventOrigin(self.origin)

    @property
    def is_fault_label(self) -> bool:
        """Whether an injected fault reported this about itself (a label for reports, never evidence)."""
        return self.origin == EventOrigin.FAULT

    def to_json(self) -> dict:
        """The event as the JSON object the reports write."""
        return {
            "t": self.t,
            "seq": self.seq,
            "request_id": self.request_id,
            "kind": self.kind,
            "offset": self.offset,
            "text_offset": self.text_offset,
            "tokens": self.tokens,
            "donor": self.donor,
            "line": self.line,
            "message": self.message,
        } | ({"origin": self.origin} if self.origin != EventOrigin.OBSERVED else {})  # absent when observed: older JSON unchanged


@dataclass
class BatchRequest:
    """One request of a burst: its payload when known (a capture), or just its id (a log).

    `request` is a qdebug.trace.request.Request or None; `error` names why the line could not be used.
    """

    request_id: str
    line: int | None = None
    request: Request | None = None
    model_name: str | None = None
    arrival_ts: float | None = None
    observed: str | None = None
    image_label: str | None = None
    error: str | None = None


@dataclass
class Batch:
    """A burst of requests and the events seen for them, from a capture or a runtime log."""

    source: str
    kind: str  # "capture" | "runtime-log"
    requests: list[BatchRequest] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    unknown_lines: int = 0
    total_lines: int = 0
