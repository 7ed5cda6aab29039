"""The app's one way in for files: traces (.qdt), replay reports (.qdr), replays of captures and logs, and what is
saved or exported from the request screen, loaded or written off the UI thread, then shown on the screen that fits.

Screens never import each other: they get this router from the app and ask it to open a path or to show a
report, a trace or a request; the router pushes the screen (a report → BatchScreen, a trace → RequestScreen).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from textual.message import Message

from qdebug.errors import describe

from . import routing
from .images import image_dirs_for
from .session import PendingRequest
from .state import TraceDoc

# The screens are imported where they are made: the first frame waits only for the screen it shows (a report's
# batch screen, or the request screen), never for the other's widgets.


def load_document(path: Path):
    """A replay report or a trace, read from `path` whatever its suffix (errors: one line through `describe`)."""
    if is_report(path):
        from qdebug.replay.report import load_report

        return load_report(path)
    from qdebug.trace.schema import load_trace

    return load_trace(path)


def is_report(path: Path) -> bool:
    """Whether `path` holds a replay report (a zip with report.json) rather than a trace: read from its zip
    directory, so a report named .qdt (or a trace named .qdr) still opens as what it is."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as zf:
            names = set(zf.namelist())
    except (OSError, zipfile.BadZipFile, ValueError):
        return path.suffix == ".qdr"  # unreadable: the loader the suffix names gives the one-line error
    return "report.json" in names and "trace.json" not in names


class Requester(Protocol):
    """The screen that asked for file work: it hears the worker's one-line result."""

    def say(self, text: str, error: bool = False) -> None:
        """Put `text` on the screen's message line."""


class FileRouter(routing.FileRouter):
    """Opens files for the screens of `app` and pushes the screen that shows what was opened.

    Work runs in a thread worker of the screen that asked (it ends with that screen); the worker posts
    Loaded / Said to the app, which hands them back here on the UI thread."""

    @dataclass
    class Loaded(Message):
        """A worker read a document (a Trace or a ReplayReport) for `requester`."""

        requester: object
        value: object
        source: str

    @dataclass
    class Said(Message):
        """A worker's one-line result for `requester`'s message line (an error when `error`)."""

        requester: Requester
        text: str
        error: bool = False

    def __init__(self, app):
        self.app = app

    # the first screen and the screens pushed on top ------------------------------------
    def first_screen(self, *, trace=None, report=None, source: str = "", pending: PendingRequest | None = None):
        """The screen the app starts on: a report's batch screen, a trace's request screen, else a live one."""
        if report is not None:
            from .screens.batch import BatchScreen

            return BatchScreen(report, files=self, source=source)
        from .screens.request import RequestScreen

        if trace is not None:
            return RequestScreen(TraceDoc(trace, source=source or "saved trace", image_dirs=image_dirs_for(source)), files=self)
        return RequestScreen(files=self, live=True, pending=pending)

    def watch_screen(self, args, interval: float):
        """The live view `qdebug watch` starts on (tui/watch_app.py): its findings' traces come back through `open`."""
        from .screens.watch import WatchScreen

        return WatchScreen(args, interval, files=self)

    def show_report(self, report, source: str) -> None:
        """Push a batch screen for a replay report."""
        from .screens.batch import BatchScreen

        self.app.push_screen(BatchScreen(report, files=self, source=source))

    def show_request(self, doc: TraceDoc, *others: TraceDoc) -> None:
        """Push a request screen for one request of a report (`others`: its other runs, the isolated reference first; `t` cycles)."""
        from .screens.request import RequestScreen

        self.app.push_screen(RequestScreen(doc, files=self, others=others))

    def show_trace(self, trace, source: str, requester) -> None:
        """Show a trace: on `requester` when it is a request screen (it takes the place of what was there), else on
        a new request screen."""
        from .screens.request import RequestScreen

        if isinstance(requester, RequestScreen):
            requester.show_opened(trace, source)
        else:
            self.app.push_screen(RequestScreen(TraceDoc(trace, source=source, image_dirs=image_dirs_for(source)), files=self))

    # work off the UI thread ---------------------------------------------------------------
    def open(self, requester, path: Path, source: str) -> None:
        """Read a .qdt trace or a .qdr report, then show it (errors go to `requester`'s message line)."""
        self.load(requester, source, lambda: load_document(path))

    def load(self, requester, source: str, load: Callable[[], object], failed: str = "") -> None:
        """Run `load()` (a Trace or a ReplayReport) in a worker, then show it; an error reads `failed` + one line."""

        def work() -> None:
            try:
                value = load()
            except Exception as exc:  # QDebugError carries a one-line message; anything else is named
                self.app.post_message(self.Said(requester, failed + describe(exc), error=True))
                return
            self.app.post_message(self.Loaded(requester, value, source))

        requester.run_worker(work, thread=True, group="files")

    def write(self, requester, write: Callable[[], object], done: str, failed: str) -> None:
        """Run `write()` in a worker; `requester` hears `done` + the path it returns, or `failed` + the error."""

        def work() -> None:
            try:
                self.app.post_message(self.Said(requester, f"{done}{write()}"))
            except Exception as exc:
                self.app.post_message(self.Said(requester, failed + describe(exc), error=True))

        requester.run_worker(work, thread=True, group="files")

    # back on the UI thread (the app hands its messages over) ------------------------------
    def loaded(self, event: FileRouter.Loaded) -> None:
        """Show what a worker read: a report on a batch screen, a trace where `show_trace` puts it."""
        if event.requester not in self.app.screen_stack:
            return  # the screen that asked is gone, and its work with it
        if hasattr(event.value, "requests"):
            self.show_report(event.value, event.source)
        else:
            self.show_trace(event.value, event.source, event.requester)

    def said(self, event: FileRouter.Said) -> None:
        """Put a worker's line on the message line of the screen that asked."""
        if event.requester in self.app.screen_stack:
            event.requester.say(event.text, event.error)
