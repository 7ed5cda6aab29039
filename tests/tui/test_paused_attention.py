"""Paused inside a live run, the attention panel shows what the stage panel says was captured (issue 36)."""

from __future__ import annotations

from qdebug.trace.tensor_names import TensorKind as T
from qdebug.tui.app import build_app
from qdebug.tui.widgets.attention_view import AttentionView
from qdebug.tui.widgets.stage_detail import StageDetail

from .conftest import ROOT, SIZE, text_of, wait_for

IMAGE = ROOT / "sample_data" / "red_circle_top_left.png"


def _paused_at(screen, stage: str):
    return lambda: screen.runs.session is not None and screen.runs.session.stepper.paused_at == stage


async def _step_to_layer_0(pilot, screen) -> None:
    """From the run's stop at preprocess, `n` to encode, sync and layer.0, waiting for each pause."""
    await wait_for(pilot, _paused_at(screen, "preprocess"), what="pause at preprocess")
    for stage in ("encode", "sync", "layer.0"):
        await pilot.press("n")
        await wait_for(pilot, _paused_at(screen, stage), what=f"pause at {stage}")


async def test_paused_at_layer_0_the_captured_attention_is_drawn(demo):
    app = build_app(loaded=demo, image_paths=[IMAGE], prompt="Describe the image.", max_new_tokens=2)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await _step_to_layer_0(pilot, screen)
        await wait_for(pilot, lambda: screen.sel.stage == "layer.0" and screen.doc is not None and "layer.0" in screen.doc.trace.stages)
        await pilot.pause()
        trace = screen.doc.trace
        held = trace.tensor(T.LAYER_ATTN, layer=0)
        detail = text_of(screen.query_one(StageDetail))
        assert f"attn_shape {list(held.shape)}".replace(" ", "") in detail.replace(" ", "")  # the stage panel says it was captured
        # …so the snapshot lists exactly the queries whose rows the layer holds, and the cursor's query is one of them
        assert held.shape[1] == len(trace.attn_queries) and screen.view().pos in trace.attn_queries
        shown = text_of(screen.query_one(AttentionView), width=130)
        assert "no attention" not in shown, shown
        assert "layer 0/" in shown and "peak row" in shown, shown  # the heatmap of layer 0 and its peak
        await pilot.press("q")


async def test_paused_before_a_layer_runs_the_panel_says_which_layer_has_not_run(demo):
    app = build_app(loaded=demo, image_paths=[IMAGE], prompt="Describe the image.", max_new_tokens=2)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await _step_to_layer_0(pilot, screen)
        await wait_for(pilot, lambda: screen.doc is not None and "layer.0" in screen.doc.trace.stages)
        screen.select(layer=2)  # `]` twice: a layer the paused forward pass has not reached
        await pilot.pause()
        shown = text_of(screen.query_one(AttentionView), width=130)
        assert "layer 2 has not run yet" in shown, shown
        await pilot.press("q")
