"""The `FileRouter` protocol: what screens and controllers ask of the app's file router (tui/files.py implements it).

Screens depend on this module, never on `files.py`, so no import circle runs through the router."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol


class FileRouter(Protocol):
    """Opens, loads and writes files off the UI thread for a requesting screen, and pushes the screen that fits."""

    def show_report(self, report: Any, source: str) -> None:
        """Push a batch screen for a replay report."""
        ...

    def show_request(self, doc: Any, *others: Any) -> None:
        """Push a request screen for one request of a report (`others`: the same request's other runs)."""
        ...

    def open(self, requester: Any, path: Path, source: str) -> None:
        """Read a .qdt trace or a .qdr report, then show it."""
        ...

    def load(self, requester: Any, source: str, load: Callable[[], object], failed: str = "") -> None:
        """Run `load()` in a worker, then show what it returns."""
        ...

    def write(self, requester: Any, write: Callable[[], object], done: str, failed: str) -> None:
        """Run `write()` in a worker; `requester` hears `done` + the path it returns, or `failed` + the error."""
        ...
