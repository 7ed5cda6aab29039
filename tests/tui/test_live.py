"""Live runs on the demo model: the forward pass really waits at breakpoints; n/c/b/g/r drive it; quit leaves no thread."""

from __future__ import annotations

import threading

from qdebug.model.choice import ModelChoice
from qdebug.tui.app import build_app
from qdebug.tui.screens.help import HelpScreen
from qdebug.tui.screens.request import RequestScreen
from qdebug.tui.widgets.message_line import MessageLine
from qdebug.tui.widgets.model_status import ModelStatus
from qdebug.tui.widgets.offset_strip import OffsetTimeline
from qdebug.tui.widgets.stage_detail import StageDetail
from qdebug.tui.widgets.stage_list import StageList

from .conftest import ROOT, SIZE, text_of, wait_for

IMAGE = ROOT / "sample_data" / "red_circle_top_left.png"
PROMPT = "Describe the image."


def _stepper_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "qdebug-stepper" and t.is_alive()]


def _hooks(model) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def _paused_at(screen: RequestScreen, stage: str):
    return lambda: screen.runs.session is not None and screen.runs.session.stepper.paused_at == stage


def _status(screen: RequestScreen, stage: str) -> str:
    return next(r.status for r in screen.query_one(StageList).rows if r.name == stage)


async def test_stepping_really_pauses_the_forward_pass(demo):
    app = build_app(loaded=demo, image_paths=[IMAGE], prompt=PROMPT, max_new_tokens=3)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await wait_for(pilot, _paused_at(screen, "preprocess"), what="pause at preprocess")
        for _ in range(5):  # let the worker run if it could: it must not
            await pilot.pause()
        stepper = screen.runs.session.stepper
        assert stepper.reached == ["preprocess"] and stepper.running
        assert _status(screen, "preprocess") == "paused" and _status(screen, "encode") == "pending"
        await pilot.press("n")
        await wait_for(pilot, _paused_at(screen, "encode"))
        assert "sync" not in stepper.reached  # blocked inside the vision tower's hook
        assert "rows" in text_of(screen.query_one(StageDetail))  # what was captured so far
        await pilot.press("n")
        await wait_for(pilot, _paused_at(screen, "sync"))
        assert "visual@3" in text_of(screen.query_one(OffsetTimeline), width=130)
        await pilot.press("down", "down", "b")  # breakpoint on layer.1
        assert "layer.1" in screen.breakpoints
        await pilot.press("c")
        await wait_for(pilot, _paused_at(screen, "layer.1"))
        assert "layer.2" not in stepper.reached
        await pilot.press("up", "up", "up")  # back to encode: what was captured there
        await wait_for(pilot, lambda: screen.sel.stage == "encode")
        assert "fingerprint" in text_of(screen.query_one(StageDetail))
        await pilot.press("g")  # continue to the next generated token
        await wait_for(pilot, _paused_at(screen, "step.0"))
        assert screen.doc.trace.steps[0].token == "a"
        await pilot.press("c")
        await wait_for(pilot, lambda: screen.doc is not None and screen.doc.complete, what="run to the end")
        assert len(screen.doc.trace.steps) == 3 and screen.doc.trace.generated_text == "a red circle"
        assert all(r.status == "done" for r in screen.query_one(StageList).rows)
        await pilot.press("g")  # finished: rerun with one more token, and show it
        await wait_for(pilot, lambda: screen.doc is not None and screen.doc.complete and len(screen.doc.trace.steps) == 4, what="g rerun")
        assert screen.doc.trace.generated_text == "a red circle in"
        await wait_for(pilot, lambda: screen.sel.stage == "step.3")
        await pilot.press("q")
    assert not _stepper_threads()


async def test_quit_at_a_breakpoint_leaves_no_thread_and_no_hooks(demo):
    hooks = _hooks(demo.model)
    app = build_app(loaded=demo, image_paths=[IMAGE], prompt=PROMPT)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await wait_for(pilot, _paused_at(screen, "preprocess"))
        await pilot.press("n", "n")
        await wait_for(pilot, _paused_at(screen, "sync"), what="paused inside the forward pass")
        assert _stepper_threads()
        await pilot.press("q")
        await wait_for(pilot, lambda: not app.is_running)
    assert not _stepper_threads()
    assert _hooks(demo.model) == hooks


async def test_r_reruns_and_cancels_the_paused_worker(demo):
    app = build_app(loaded=demo, image_paths=[IMAGE], prompt=PROMPT, max_new_tokens=2)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await wait_for(pilot, _paused_at(screen, "preprocess"))
        await pilot.press("n")
        await wait_for(pilot, _paused_at(screen, "encode"))
        first = screen.runs.session
        await pilot.press("r")
        await wait_for(pilot, lambda: screen.runs.session is not first and _paused_at(screen, "preprocess")())
        first.stepper.join(10)
        assert not first.alive
        assert len(_stepper_threads()) == 1
        await pilot.press("c")
        await wait_for(pilot, lambda: screen.doc is not None and screen.doc.complete)
        await pilot.press("n")
        assert "no run in progress" in screen.query_one(MessageLine).message[0]
    assert not _stepper_threads()


async def test_model_loads_in_a_worker_while_the_ui_answers(tmp_path):
    app = build_app(model_spec=ModelChoice(model="demo", device="cpu", dtype="float32", attn_kernel="eager"))
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        # The indicator tells the truth on the first frame: shown while loading (a warm, busy machine may
        # already have finished loading by the time the test first looks, and then it must be gone).
        assert screen.query_one(ModelStatus).display == (app.loaded is None)
        await pilot.press("question_mark")  # keys work while the model loads
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.loaded is not None, timeout=120, what="model loaded")
        assert not screen.query_one(ModelStatus).display
        for line in (f"image {IMAGE}", "prompt What do you see?", "run"):
            screen.run_command(line)
        await wait_for(pilot, _paused_at(screen, "preprocess"))
        await pilot.press("c")
        await wait_for(pilot, lambda: screen.doc is not None and screen.doc.complete)
        assert screen.doc.trace.generated_text == "a red circle in the top left"
        await pilot.press("g")  # it stopped at the end-of-sequence token: nothing more to generate
        assert "end-of-sequence" in screen.query_one(MessageLine).message[0]
        await pilot.press("q")
    assert not _stepper_threads()


async def test_a_model_that_cannot_load_is_an_inline_error():
    app = build_app(model_spec=ModelChoice(model="/nonexistent/checkpoint", device="cpu", dtype="float32", attn_kernel="eager"))
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await wait_for(pilot, lambda: screen.runs.model_error is not None, timeout=60)
        text, error = screen.query_one(MessageLine).message
        assert error and "/nonexistent/checkpoint" in text
        screen.run_command("prompt hi")
        screen.run_command("run")
        assert "cannot run" in screen.query_one(MessageLine).message[0]
        assert app.is_running
