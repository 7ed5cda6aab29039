"""The command bar: parsing, completion, history, and every command run through the app (errors stay inline)."""

from __future__ import annotations

import sys

import pytest

from qdebug.tui.app import build_app
from qdebug.tui.command_language import Command, CommandError, complete, export_path, int_or_mean, parse
from qdebug.tui.screens.batch import BatchScreen
from qdebug.tui.screens.help import HelpScreen
from qdebug.tui.screens.request import RequestScreen
from qdebug.tui.widgets.command_bar import CommandBar
from qdebug.tui.widgets.message_line import MessageLine

from .conftest import REPORT, SIZE, TRACE, wait_for


def test_parse_names_aliases_and_missing_arguments():
    assert parse("layer 2") == Command("layer", "2")
    assert parse("  n ") == Command("next")
    assert parse(":layer 2") == Command("layer", "2")
    assert parse("prompt What is here?") == Command("prompt", "What is here?")
    with pytest.raises(CommandError, match="unknown command 'lay'.*layer"):
        parse("lay 2")
    with pytest.raises(CommandError, match="break needs STAGE"):
        parse("break")
    assert int_or_mean(Command("head", "mean"), 4) is None
    with pytest.raises(CommandError, match="expected 0..3"):
        int_or_mean(Command("head", "4"), 4)
    with pytest.raises(CommandError, match="png PATH"):
        export_path(Command("export", "jpg x"))


def test_completion_of_commands_stages_mean_and_paths(monkeypatch, tmp_path):
    stages = ["preprocess", "encode", "sync", "layer.0", "layer.1", "logits", "step.0"]
    assert complete("brea", stages) == "break"
    assert complete("break lay", stages) == "break layer.0"
    assert complete("clear al", stages) == "clear all"
    assert complete("head m", stages) == "head mean"
    assert complete("export p", stages) == "export png "
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "one.qdt").write_text("")
    monkeypatch.chdir(tmp_path)
    assert complete("open tr", stages) == "open traces/"
    assert complete("open traces/o", stages) == "open traces/one.qdt"
    assert complete("layer 1", stages) is None


async def _type(pilot, app, line: str) -> None:
    await pilot.press("colon")
    bar = app.screen.query_one(CommandBar)
    bar.value = line
    await pilot.press("enter")
    await pilot.pause()


def _message(app) -> tuple[str, bool]:
    return app.screen.query_one(MessageLine).message


async def test_view_commands_change_the_selection(trace):
    app = build_app(trace=trace)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await _type(pilot, app, "layer 2")
        await _type(pilot, app, "head 1")
        await _type(pilot, app, "token 5")
        await _type(pilot, app, "topk 3")
        assert (screen.sel.layer, screen.sel.head, screen.sel.pos, screen.sel.topk) == (2, 1, 5, 3)
        await _type(pilot, app, "head mean")
        await _type(pilot, app, "layer mean")
        assert (screen.sel.layer, screen.sel.head) == (None, None)


async def test_breakpoint_commands_and_bad_input_stay_inline(trace):
    app = build_app(trace=trace)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await _type(pilot, app, "break layer.1")
        assert "layer.1" in screen.breakpoints
        await _type(pilot, app, "break step.*")
        assert "step.*" in screen.breakpoints
        await _type(pilot, app, "clear layer.1")
        assert "layer.1" not in screen.breakpoints
        await _type(pilot, app, "clear all")
        assert not screen.breakpoints
        for bad, why in [("break layer.9", "not a stage"), ("break bogus", "not a stage"), ("layer 7", "expected 0..3"),
                         ("token 9999", "expected 0.."), ("frobnicate", "unknown command"), ("open nowhere.qdt", "no such file"),
                         ("open README.md", "expected a .qdt"), ("image nowhere.png", "image not found"), ("export png", "png PATH"),
                         ("run", "no model here"), ("next", "saved trace")]:
            await _type(pilot, app, bad)
            text, error = _message(app)
            assert error and why in text, (bad, text)
        assert app.is_running and isinstance(app.screen, RequestScreen)


async def test_history_and_tab_completion_in_the_bar(trace):
    app = build_app(trace=trace)
    async with app.run_test(size=SIZE) as pilot:
        await _type(pilot, app, "layer 1")
        await _type(pilot, app, "head 2")
        bar = app.screen.query_one(CommandBar)
        assert not bar.has_focus  # Enter returns to the main view, as in vim
        await pilot.press("colon")
        await pilot.press("up")
        assert bar.value == "head 2"
        await pilot.press("up")
        assert bar.value == "layer 1"
        await pilot.press("down", "down")
        assert bar.value == ""
        await pilot.press(*"brea")
        await wait_for(pilot, lambda: bar._suggestion == "break", what="suggestion")
        await pilot.press("tab")
        assert bar.value == "break" and bar.has_focus
        await pilot.press(*" lay")
        await wait_for(pilot, lambda: bar._suggestion == "break layer.0", what="stage suggestion")
        await pilot.press("tab", "enter")
        assert "layer.0" in app.screen.breakpoints


async def test_save_and_export_png_write_files(trace, tmp_path):
    app = build_app(trace=trace)
    async with app.run_test(size=SIZE) as pilot:
        await _type(pilot, app, f"save {tmp_path / 'again.qdt'}")
        await wait_for(pilot, lambda: _message(app)[0].startswith("saved"), what="save")
        await _type(pilot, app, f"export png {tmp_path / 'heat.png'}")
        await wait_for(pilot, lambda: _message(app)[0].startswith("wrote"), timeout=120, what="export")
    from qdebug.trace.schema import load_trace

    assert load_trace(tmp_path / "again.qdt").generated_text == trace.generated_text
    assert (tmp_path / "heat.png").read_bytes()[:4] == b"\x89PNG"


async def test_open_a_trace_then_a_report(trace):
    app = build_app(trace=trace)
    async with app.run_test(size=SIZE) as pilot:
        await _type(pilot, app, f"open {TRACE}")
        await wait_for(pilot, lambda: _message(app)[0].startswith("opened"), what="open trace")
        assert app.screen.doc.trace.generated_text == trace.generated_text
        await _type(pilot, app, f"open {REPORT}")
        await wait_for(pilot, lambda: isinstance(app.screen, BatchScreen), what="batch screen")
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, RequestScreen))


async def test_replay_uses_the_replay_command_or_says_it_is_unavailable(trace, monkeypatch):
    app = build_app(trace=trace)
    async with app.run_test(size=SIZE) as pilot:
        await _type(pilot, app, f"replay {REPORT}")
        await wait_for(pilot, lambda: isinstance(app.screen, BatchScreen), timeout=120, what="replayed report")
        await pilot.press("escape")
        monkeypatch.setitem(sys.modules, "qdebug.commands.replay", None)  # as if the module were missing
        await _type(pilot, app, f"replay {REPORT}")
        text, error = _message(app)
        assert error and "replay is unavailable" in text


async def test_help_and_quit_commands(trace):
    app = build_app(trace=trace)
    async with app.run_test(size=SIZE) as pilot:
        await _type(pilot, app, "help")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, RequestScreen))
        await _type(pilot, app, "quit")
        await wait_for(pilot, lambda: not app.is_running)
