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
