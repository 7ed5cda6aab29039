"""The request screen on a saved trace (no model): stages, detail, keys for layer/head/query, inline errors."""

from __future__ import annotations

from qdebug.tui.app import build_app
from qdebug.tui.screens.help import HelpScreen
from qdebug.tui.screens.request import RequestScreen
from qdebug.tui.widgets.attention_view import AttentionView
from qdebug.tui.widgets.command_bar import CommandBar
from qdebug.tui.widgets.message_line import MessageLine
from qdebug.tui.widgets.offset_strip import OffsetTimeline
from qdebug.tui.widgets.stage_detail import StageDetail
from qdebug.tui.widgets.stage_list import StageList
from qdebug.tui.widgets.topk_panel import TopKPanel

from .conftest import SIZE, text_of, wait_for


def _screen(app) -> RequestScreen:
    assert isinstance(app.screen, RequestScreen)
    return app.screen


async def test_lists_every_stage_of_the_trace_and_shows_its_detail(trace):
    app = build_app(trace=trace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        stages = app.screen.query_one(StageList)
        assert [r.name for r in stages.rows] == trace.stage_names
        assert all(r.status == "done" and not r.failed for r in stages.rows)
        assert stages.has_focus
        assert "one placeholder span per image" in text_of(app.screen.query_one(StageDetail))
        await pilot.press("down", "down")
        await wait_for(pilot, lambda: _screen(app).sel.stage == "sync")
        detail = text_of(app.screen.query_one(StageDetail))
        assert "visual_offset" in detail and "✓ image 0: visual offset == text offset" in detail


async def test_down_to_a_layer_picks_its_heatmap_layer_and_a_step_its_query(trace):
    app = build_app(trace=trace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(*["down"] * 4)
        await wait_for(pilot, lambda: _screen(app).sel.stage == "layer.1")
        assert _screen(app).sel.layer == 1
        assert "layer 1/4" in text_of(app.screen.query_one(AttentionView))
        await pilot.press(*["down"] * 5)  # layer.2, layer.3, logits, step.0, step.1
        await wait_for(pilot, lambda: _screen(app).sel.stage == "step.1")
        assert _screen(app).sel.pos == len(trace.input_ids)  # the query that chose step 1
        topk = text_of(app.screen.query_one(TopKPanel))
        assert "step 1" in topk and repr(trace.steps[1].token) in topk


async def test_brackets_cycle_layers_and_h_cycles_heads(trace):
    app = build_app(trace=trace)
    async with app.run_test(size=SIZE) as pilot:
        screen = _screen(app)
        assert screen.sel.layer is None and screen.sel.head is None
        await pilot.press("right_square_bracket")
        assert screen.sel.layer == 0
        await pilot.press("right_square_bracket", "right_square_bracket")
        assert screen.sel.layer == 2
        await pilot.press("left_square_bracket", "left_square_bracket", "left_square_bracket")
        assert screen.sel.layer is None  # back to the mean
        await pilot.press("left_square_bracket")
        assert screen.sel.layer == trace.meta.num_layers - 1  # wraps
        heads = []
        for _ in range(trace.meta.num_heads + 1):
            await pilot.press("h")
            heads.append(screen.sel.head)
        assert heads == [*range(trace.meta.num_heads), None]  # mean → 0 → 1 … → mean
        await pilot.press("h")
        await pilot.pause()
        assert "head 0/" in text_of(screen.query_one(AttentionView))


async def test_arrows_move_the_query_token_through_the_attention_queries(trace):
    app = build_app(trace=trace)
    async with app.run_test(size=SIZE) as pilot:
        screen = _screen(app)
        last_prompt = len(trace.input_ids) - 1
        assert screen.view().pos == last_prompt  # the query that chose step 0
        await pilot.press("right")
        assert screen.view().pos == trace.attn_queries[trace.attn_queries.index(last_prompt) + 1]
        await pilot.press("left", "left")
        assert screen.view().pos == trace.attn_queries[trace.attn_queries.index(last_prompt) - 1]
        span_end = trace.images[0].span[1]
        for _ in range(len(trace.attn_queries)):
            await pilot.press("left")
        assert screen.view().pos == trace.attn_queries[0]
        await pilot.press("shift+right", "shift+right", "shift+right", "shift+right")
        assert screen.view().pos == trace.attn_queries[0] + 4
        await pilot.pause()
        timeline = text_of(screen.query_one(OffsetTimeline))
        assert "image 0 patch" in timeline and "MRoPE (t,h,w)" in timeline
        attention = text_of(screen.query_one(AttentionView))
        assert "no attention" in attention  # an image token is not a query
        assert span_end > screen.view().pos


async def test_b_toggles_a_breakpoint_on_the_selected_stage(trace):
    app = build_app(trace=trace)
    async with app.run_test(size=SIZE) as pilot:
        screen = _screen(app)
        await pilot.press("down", "b")
        assert "encode" in screen.breakpoints
        assert next(r for r in screen.query_one(StageList).rows if r.name == "encode").breakpoint
        await pilot.press("b")
        assert "encode" not in screen.breakpoints


async def test_run_keys_on_a_saved_trace_say_why_inline_and_keep_the_app(trace):
    app = build_app(trace=trace)
    async with app.run_test(size=SIZE) as pilot:
        screen = _screen(app)
        for key in ("n", "c", "g", "r"):
            screen.query_one(MessageLine).say("")
            await pilot.press(key)
            text, error = screen.query_one(MessageLine).message
            assert error and "saved trace" in text, (key, text)
        assert app.is_running


async def test_help_opens_and_closes_and_colon_focuses_the_command_bar(trace):
    app = build_app(trace=trace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, RequestScreen))
        await pilot.press("colon")
        assert app.screen.query_one(CommandBar).has_focus
        await pilot.press("escape")
        assert app.screen.query_one(StageList).has_focus


async def test_q_quits(trace):
    app = build_app(trace=trace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("q")
        await wait_for(pilot, lambda: not app.is_running)


async def test_missing_image_file_shows_a_placeholder_not_the_thumbnail(trace):
    import copy

    moved = copy.copy(trace)
    moved.images = [copy.copy(trace.images[0])]
    moved.images[0].path = "nowhere/red_circle.png"
    app = build_app(trace=moved)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        drawn = text_of(app.screen.query_one(AttentionView))
        assert "image not available" in drawn and "red_circle.png" in drawn, drawn


async def test_i_cycles_images_and_shift_arrows_scroll_the_detail(trace):
    app = build_app(trace=trace)
    async with app.run_test(size=SIZE) as pilot:
        screen = _screen(app)
        await pilot.press("i")
        assert screen.sel.image == 0  # one image: stays on it
        await pilot.press("down", "down")  # sync: more lines than the box shows
        await wait_for(pilot, lambda: screen.sel.stage == "sync")
        detail = screen.query_one(StageDetail)
        await pilot.pause()
        assert len(detail.text.splitlines()) > detail.size.height  # so it can scroll
        await pilot.press("shift+down")
        assert detail.offset_y == 3
        await pilot.press("shift+up")
        assert detail.offset_y == 0
