"""Issue 36: `repl --trace` opens what the file is: a replay report (even named .qdt) opens the batch screen, a trace
(even named .qdr) the request screen; a file that is neither gets a one-line error naming the file."""

from __future__ import annotations

import shutil

from typer.testing import CliRunner

from qdebug.cli import app as cli
from qdebug.tui.screens.batch import BatchScreen
from qdebug.tui.screens.request import RequestScreen

from .conftest import REPORT, SIZE, TRACE


def _app_built_by_repl(monkeypatch, path):
    """The QDebugApp `qdebug repl --trace PATH` builds (its run() replaced by keeping the app, to drive it headless)."""
    import qdebug.tui.app as tui

    built = []
    monkeypatch.setattr(tui.QDebugApp, "run", lambda self, *a, **k: built.append(self))
    result = CliRunner().invoke(cli, ["repl", "--trace", str(path)])
    assert result.exit_code == 0, result.output
    assert len(built) == 1
    return built[0]


async def _screen_of(app):
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        return type(app.screen), app.screen


async def test_a_report_given_to_trace_opens_the_batch_screen(monkeypatch):
    kind, screen = await _screen_of(_app_built_by_repl(monkeypatch, REPORT))
    assert kind is BatchScreen


async def test_a_report_named_like_a_trace_still_opens_the_batch_screen(monkeypatch, tmp_path):
    disguised = tmp_path / "burst.qdt"
    shutil.copy(REPORT, disguised)
    kind, _ = await _screen_of(_app_built_by_repl(monkeypatch, disguised))
    assert kind is BatchScreen


async def test_a_trace_named_like_a_report_opens_the_request_screen(monkeypatch, tmp_path):
    disguised = tmp_path / "red.qdr"
    shutil.copy(TRACE, disguised)
    kind, _ = await _screen_of(_app_built_by_repl(monkeypatch, disguised))
    assert kind is RequestScreen


def test_a_file_that_is_neither_is_one_line_naming_it(tmp_path):
    junk = tmp_path / "junk.qdt"
    junk.write_text("not a zip")
    result = CliRunner().invoke(cli, ["repl", "--trace", str(junk)])
    assert result.exit_code == 2
    assert "junk.qdt" in result.output and "Traceback" not in result.output
