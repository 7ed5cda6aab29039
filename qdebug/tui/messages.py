"""Messages that flow up: from workers and widgets to screens and the app (small dataclasses)."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message


@dataclass
class ModelLoaded(Message):
    """The model finished loading in its worker."""

    loaded: object


@dataclass
class ModelLoadFailed(Message):
    """The model could not be loaded (a one-line reason)."""

    error: str


@dataclass
class RunEvent(Message):
    """A live run reached/paused at a stage, or ended (done/error/cancelled). `trace`: snapshot or final trace."""

    run_id: int
    kind: str
    stage: str | None
    trace: object | None = None
    error: str | None = None


@dataclass
class StageHighlighted(Message):
    """The cursor of the stage list moved to a stage."""

    stage: str


@dataclass
class CommandEntered(Message):
    """The user submitted a line in the command bar."""

    line: str


@dataclass
class FileLoaded(Message):
    """`open`/`replay` finished loading: a Trace (kind "trace") or a ReplayReport (kind "report")."""

    kind: str
    value: object
    path: str


@dataclass
class Notice(Message):
    """A line for the message bar (from a worker): an error when `error` is set."""

    text: str
    error: bool = False


@dataclass
class RequestChosen(Message):
    """Enter on a request of the batch screen."""

    request_id: str


@dataclass
class ReplayProgress(Message):
    """A replay in the TUI moved on: references and replayed requests done out of `total`, contaminated so far."""

    references: int
    replayed: int
    total: int
    contaminated: int


@dataclass
class ReplayEnded(Message):
    """A replay in the TUI ended: its report, or None when it was cancelled (`ran`: requests replayed by then)."""

    path: str
    report: object | None
    ran: int = 0
    total: int = 0
    contaminated: int = 0
    references: int = 0
