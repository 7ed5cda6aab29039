"""TUI fixtures: the saved demo trace and replay report from tests/data, and a condition-waiting helper."""

from __future__ import annotations

import asyncio
import inspect
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
TRACE = DATA / "red_circle.qdt"
REPORT = DATA / "burst.qdr"
SIZE = (140, 45)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """Run `async def` tests (App.run_test / Pilot) on a fresh event loop, without an async plugin."""
    if inspect.iscoroutinefunction(pyfuncitem.obj):
        args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
        asyncio.run(pyfuncitem.obj(**args))
        return True
    return None


@pytest.fixture(autouse=True)
def _at_repo_root(monkeypatch):
    """Image paths inside the fixtures are relative to the repository root."""
    monkeypatch.chdir(ROOT)


@pytest.fixture(scope="session")
def trace():
    """The saved red-circle trace (made by tests/data/make_fixtures.py from the demo model)."""
    from qdebug.trace.schema import load_trace

    return load_trace(TRACE)


@pytest.fixture(scope="session")
def report():
    """The hand-made burst: a, b, c with c contaminated by b."""
    from qdebug.replay.report import load_report

    return load_report(REPORT)


async def wait_for(pilot, condition, timeout: float = 60.0, what: str = "") -> None:
    """Let the app run until `condition()` holds (no sleeps: each turn processes pending messages)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or condition}")
        await pilot.pause(0.01)


def text_of(widget, width: int | None = None) -> str:
    """What a widget draws, as plain text (its render() through a colourless console)."""
    import io

    from rich.console import Console

    if isinstance(getattr(type(widget), "text", None), property):  # panels that keep their own lines (StageDetail)
        return widget.text

    console = Console(file=io.StringIO(), width=width or max(40, widget.size.width), color_system=None, legacy_windows=False)
    console.print(widget.render())
    return console.file.getvalue()
