"""`repl --trace` opens an engine trace like any other: every stage listed, its checks, vLLM's positions, the top-k."""

from __future__ import annotations

import pytest

from qdebug.tui.app import build_app
from qdebug.tui.screens.request import RequestScreen
from qdebug.tui.widgets.attention_view import AttentionView
from qdebug.tui.widgets.stage_detail import StageDetail
from qdebug.tui.widgets.stage_list import StageList
from qdebug.tui.widgets.topk_panel import TopKPanel
from tests.tui.conftest import SIZE, text_of, wait_for

from .client import engine_trace, request_for, send

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def saved(traced_server):
    send(traced_server, request_for("red_circle_top_left.png"), "for-the-tui")
    engine_trace(traced_server, "for-the-tui")
    return traced_server.traces / "for-the-tui.qdt"


def test_the_request_screen_walks_an_engine_trace(saved):
    import asyncio

    from qdebug.trace.schema import load_trace

    asyncio.run(_walk(load_trace(saved), saved))


async def _walk(trace, saved) -> None:
    app = build_app(trace=trace, source=str(saved))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, RequestScreen)
        rows = app.screen.query_one(StageList).rows
        assert [r.name for r in rows] == trace.stage_names and not any(r.failed for r in rows)
        await pilot.press("down", "down")
        await wait_for(pilot, lambda: app.screen.sel.stage == "sync")
        detail = text_of(app.screen.query_one(StageDetail))
        assert "✓ image 0: visual offset == text offset" in detail
        await pilot.press(*["down"] * 4)
        await wait_for(pilot, lambda: app.screen.sel.stage == "layer.3")
        assert "an engine trace (vllm exposes no attention weights)" in text_of(app.screen.query_one(AttentionView))
        await pilot.press(*["down"] * 2)
        await wait_for(pilot, lambda: app.screen.sel.stage == "step.0")
        assert repr(trace.steps[0].token) in text_of(app.screen.query_one(TopKPanel))


def test_repl_trace_on_the_command_line_refuses_nothing_it_can_read(saved):
    """The installed command takes the same path (`repl --trace FILE`): load, then build_app (checked without a terminal)."""
    from typer.testing import CliRunner

    from qdebug.cli import app

    result = CliRunner().invoke(app, ["repl", "--trace", str(saved.parent / "missing.qdt")])
    assert result.exit_code == 2 and "trace not found" in result.output
