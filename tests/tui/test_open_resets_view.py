"""`:open` shows the new trace from its first generated token, whatever the cursor did on the trace before."""

from __future__ import annotations

from qdebug.tui.app import build_app
from qdebug.tui.widgets.attention_view import AttentionView
from qdebug.tui.widgets.command_bar import CommandBar
from qdebug.tui.widgets.message_line import MessageLine
from qdebug.tui.widgets.stage_list import StageList

from .conftest import SIZE, TRACE, text_of, wait_for


async def _type(pilot, app, line: str) -> None:
    await pilot.press("colon")
    app.screen.query_one(CommandBar).value = line
    await pilot.press("enter")
    await pilot.pause()


async def test_open_resets_the_cursor_to_the_first_generated_token(trace):
    app = build_app(trace=trace)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        image_token = trace.images[0].span[0] + 5  # an image-pad token: no attention row was captured there
        await _type(pilot, app, f"token {image_token}")
        await _type(pilot, app, "layer 1")
        await _type(pilot, app, "topk 3")
        await pilot.pause()
        missing = " ".join(text_of(screen.query_one(AttentionView)).split())  # the panel wraps long lines
        assert f"query pos {image_token} is not one whose attention rows are kept" in missing
        await _type(pilot, app, f"open {TRACE}")
        await wait_for(pilot, lambda: screen.query_one(MessageLine).message[0].startswith("opened"), what="open")
        await pilot.pause()
        first_query = screen.doc.prompt_len - 1  # the query that chose step 0
        assert screen.view().pos == first_query
        assert screen.sel.stage == "step.0" and screen.query_one(StageList).current == "step.0"
        assert screen.sel.layer is None and screen.sel.topk == 3  # top-k depth is a preference: it stays
        attention = text_of(screen.query_one(AttentionView))
        assert "no attention" not in attention and "not one whose attention rows are kept" not in attention
