"""The batch screen on the hand-made burst: verdicts and donors, timeline, matrix, Enter opens a request, t toggles."""

from __future__ import annotations

from qdebug.tui.app import build_app
from qdebug.tui.screens.batch import BatchScreen
from qdebug.tui.screens.request import RequestScreen
from qdebug.tui.widgets.contamination_view import ContaminationView
from qdebug.tui.widgets.event_timeline import EventTimeline
from qdebug.tui.widgets.request_table import RequestTable

from .conftest import SIZE, text_of, wait_for


async def test_rows_timeline_and_matrix(report):
    app = build_app(report=report)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, BatchScreen)
        table = app.screen.query_one(RequestTable)
        assert table.row_count == 3
        row_c = [str(c) for c in table.get_row("c")]
        assert row_c[:3] == ["c", "contaminated", "b"]
        assert [str(c) for c in table.get_row("a")][1:3] == ["ok", "–"]
        timeline = text_of(app.screen.query_one(EventTimeline), width=100)
        lane_c = next(line for line in timeline.splitlines() if line[1:3] == "c ")
        assert "O" in lane_c  # c's lane shows the overwrite…
        assert "buffer_overwrite" in timeline and "donor b" in timeline  # …and the list names the donor
        matrix = text_of(app.screen.query_one(ContaminationView), width=60)
        assert "◀ b's rows" in matrix


async def test_cursor_highlights_the_lane_and_enter_opens_the_replayed_trace(report):
    app = build_app(report=report)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("down", "down")
        await wait_for(pilot, lambda: app.screen.query_one(EventTimeline).selected == "c")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RequestScreen))
        screen = app.screen
        assert screen.doc.trace is report.traces["c"]
        assert screen.doc.trace.generated_text == "a blue circle in the top right"
        await pilot.press("t")
        assert screen.doc.trace is report.references["c"]
        assert screen.doc.trace.generated_text == "a green square in the bottom left"
        await pilot.press("t")
        assert screen.doc.trace is report.traces["c"]
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, BatchScreen))


async def test_batch_commands_and_q(report):
    from qdebug.tui.widgets.command_bar import CommandBar
    from qdebug.tui.widgets.message_line import MessageLine

    app = build_app(report=report)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("colon")
        app.screen.query_one(CommandBar).value = "layer 2"
        await pilot.press("enter")
        text, error = app.screen.query_one(MessageLine).message
        assert error and "request screen" in text
        await pilot.press("escape", "q")
        await wait_for(pilot, lambda: not app.is_running)
