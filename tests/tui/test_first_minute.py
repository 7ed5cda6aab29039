"""A new user's first minute in `qdebug repl`: focus after a command, keys pressed ahead, one paused state,
a visible restart, `replay FILE` progress and cancel, and `i` on a two-image request (demo model, real runs)."""

from __future__ import annotations

import json
import shutil
import threading

from qdebug.model.choice import ModelChoice
from qdebug.tui.app import build_app
from qdebug.tui.screens.batch import BatchScreen
from qdebug.tui.screens.request import RequestScreen
from qdebug.tui.widgets.attention_view import AttentionView
from qdebug.tui.widgets.command_bar import CommandBar
from qdebug.tui.widgets.message_line import MessageLine
from qdebug.tui.widgets.replay_status import ReplayStatus
from qdebug.tui.widgets.stage_detail import StageDetail
from qdebug.tui.widgets.stage_list import StageList, row_text

from .conftest import ROOT, SIZE, text_of, wait_for

IMAGE = ROOT / "sample_data" / "blue_square_bottom_right.png"
SECOND = ROOT / "sample_data" / "red_circle_top_left.png"
PROMPT = "Describe the image."


def _paused_at(screen: RequestScreen, stage: str):
    return lambda: screen.runs.session is not None and screen.runs.session.stepper.paused_at == stage


def _message(screen) -> str:
    return screen.query_one(MessageLine).message[0]


def _finished(screen):
    return lambda: screen.doc is not None and screen.doc.complete


async def _command(pilot, line: str) -> None:
    """Type a command as a user does: `:`, the line, Enter."""
    await pilot.press("colon", *line, "enter")


async def test_enter_runs_the_command_and_returns_to_the_main_view(demo):
    app = build_app(loaded=demo, image_paths=[IMAGE], prompt=PROMPT, max_new_tokens=3)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await wait_for(pilot, _paused_at(screen, "preprocess"))
        await _command(pilot, "break sync")
        bar = screen.query_one(CommandBar)
        assert "sync" in screen.breakpoints
        assert not bar.has_focus and screen.query_one(StageList).has_focus
        await pilot.press("c")  # steps, not typed into the bar
        await wait_for(pilot, _paused_at(screen, "sync"), what="c after a command continues to the breakpoint")
        assert bar.value == ""
        await pilot.press("n")
        await wait_for(pilot, _paused_at(screen, "layer.0"))


def _held_loader(monkeypatch) -> threading.Event:
    """The real loader, held until the test lets it go (so a key surely arrives while the model loads)."""
    import qdebug.model.load as load

    go, real = threading.Event(), load.load_model

    def held(*args, **kwargs):
        go.wait(60)
        return real(*args, **kwargs)

    monkeypatch.setattr(load, "load_model", held)
    return go


async def test_a_key_pressed_while_the_model_loads_acts_once_it_is_ready(monkeypatch):
    go = _held_loader(monkeypatch)
    app = build_app(model_spec=ModelChoice(model="demo", device="cpu", dtype="float32", attn_kernel="eager"), image_paths=[IMAGE], prompt=PROMPT, max_new_tokens=4)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await pilot.press("c")
        assert app.loaded is None  # pressed while loading
        assert "queued" in _message(screen) and "c" in _message(screen)
        assert "run 1 · waits for the model to load" in screen.panels.info_plain
        go.set()
        await wait_for(pilot, _finished(screen), timeout=180, what="the queued c runs the request to the end")
        assert screen.doc.trace.generated_text == "a blue square in"
        assert not screen.runs.queued


async def test_keys_pressed_while_a_rerun_starts_act_on_the_new_run(demo):
    app = build_app(loaded=demo, image_paths=[IMAGE], prompt=PROMPT, max_new_tokens=2)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await wait_for(pilot, _paused_at(screen, "preprocess"))
        await pilot.press("n")
        await wait_for(pilot, _paused_at(screen, "encode"))
        await pilot.press("r", "n", "n")  # the new run has not stopped yet when the n's arrive
        await wait_for(pilot, lambda: screen.runs.session.id == 2 and _paused_at(screen, "sync")(), what="both n's act on run 2")
        assert screen.runs.session.stepper.reached == ["preprocess", "encode", "sync"]


async def test_a_key_while_loading_without_a_request_says_why(monkeypatch):
    go = _held_loader(monkeypatch)
    app = build_app(model_spec=ModelChoice(model="demo", device="cpu", dtype="float32", attn_kernel="eager"))
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await pilot.press("n")
        assert "no run yet" in _message(screen) and "prompt" in _message(screen)
        go.set()


async def test_one_paused_state_in_header_panel_and_list(demo):
    app = build_app(loaded=demo, image_paths=[IMAGE], prompt=PROMPT, max_new_tokens=2)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await wait_for(pilot, _paused_at(screen, "preprocess"))
        await wait_for(pilot, lambda: screen.doc is not None, what="the preprocess snapshot")
        await pilot.pause()
        header = screen.panels.info_plain
        detail = " ".join(text_of(screen.query_one(StageDetail)).split())  # as read, whatever the wrapping
        row = screen.query_one(StageList).rows[0]
        assert "run 1 · paused at preprocess" in header and "next request" not in header
        assert "run 1 · paused at preprocess" in detail and "no request yet" not in detail
        assert row.name == "preprocess" and row.status == "paused" and "paused" in row_text(row).plain
        assert "run 1 · paused at preprocess" in _message(screen)
        # what preprocess captured: the prompt, the tokens, the image's placeholder span
        assert "Describe the image." in detail and "<image 0: 64 tokens @3>" in detail and "[[3, 67]]" in detail
        assert "as pdb does" in detail


async def test_run_on_a_paused_run_visibly_starts_a_new_one(demo):
    app = build_app(loaded=demo, image_paths=[IMAGE], prompt=PROMPT, max_new_tokens=2)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await wait_for(pilot, _paused_at(screen, "preprocess"))
        first = screen.runs.session
        await _command(pilot, "run")
        assert screen.runs.session is not first and screen.runs.session.id == 2
        said = _message(screen)  # the new run may already have paused: either line names it
        assert ("run 2 started" in said and "run 1 cancelled" in said) or "run 1 was replaced" in said, said
        assert any("run 2 started" in n.message for n in app._notifications)
        await wait_for(pilot, lambda: screen.runs.session is not first and _paused_at(screen, "preprocess")())
        await pilot.pause()
        assert "run 2 · paused at preprocess" in screen.panels.info_plain
        assert "new run; run 1 was replaced" in _message(screen)


def _small_capture(tmp_path, n: int = 3):
    """The first `n` requests of the sample capture, with their images beside it."""
    lines = (ROOT / "sample_data" / "capture.jsonl").read_text().splitlines()[:n]
    (tmp_path / "capture").mkdir()
    for line in lines:
        url = json.loads(line)["messages"][0]["content"][0]["image_url"]["url"]
        if not url.startswith("data:"):  # some requests carry their image inline
            shutil.copy(ROOT / "sample_data" / url, tmp_path / url)
    path = tmp_path / "small.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


async def test_replay_shows_progress_then_the_batch_screen(demo, tmp_path):
    capture = _small_capture(tmp_path)
    app = build_app(loaded=demo)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await _command(pilot, f"replay {capture}")
        status = screen.query_one(ReplayStatus)
        await wait_for(pilot, lambda: isinstance(app.screen, BatchScreen), timeout=180, what="the batch screen")
        seen = status.lines
        await wait_for(pilot, lambda: app.screen.is_mounted and app.screen.query("#events"), what="batch screen mounted")
        await pilot.pause()
        assert any("references 1/3" in s for s in seen), seen
        assert "3/3 requests, contaminated 0" in _message(screen)
        assert [r.id for r in app.screen.report.requests] == ["req-01", "req-02", "req-03"]
        assert not status.display


async def test_esc_cancels_a_replay(demo, tmp_path, monkeypatch):
    from qdebug.tui.replay_job import ReplayJob

    capture = _small_capture(tmp_path, 6)
    go, real = threading.Event(), ReplayJob._on_progress

    def held(job, *args):  # the real replay thread waits after its first request until Esc was pressed
        real(job, *args)
        go.wait(60)

    monkeypatch.setattr(ReplayJob, "_on_progress", held)
    app = build_app(loaded=demo)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await _command(pilot, f"replay {capture}")
        status = screen.query_one(ReplayStatus)
        await wait_for(pilot, lambda: "references 1/6" in status.line, timeout=120, what="first reference")
        job = screen.replays.job
        await pilot.press("escape")
        assert job.cancelling
        go.set()
        await wait_for(pilot, lambda: screen.replays.job is None, timeout=120, what="the replay stops")
        said = _message(screen)
        assert "cancelled" in said and "replayed" in said and "/6" in said, said
        assert job.references < 6  # stopped early
        assert isinstance(app.screen, RequestScreen) and not screen.query_one(ReplayStatus).display
        for _ in range(5):
            await pilot.pause()
        assert isinstance(app.screen, RequestScreen)  # no report pushed after a cancel


async def test_i_walks_the_images_of_a_two_image_request(demo):
    app = build_app(loaded=demo, image_paths=[IMAGE, SECOND], prompt=PROMPT, max_new_tokens=3)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await wait_for(pilot, _paused_at(screen, "preprocess"))
        await pilot.press("c")
        await wait_for(pilot, _finished(screen), timeout=120)
        images = screen.doc.trace.images
        assert len(images) == 2
        view = screen.query_one(AttentionView)
        first = text_of(view, width=130)
        assert f"image 0 ({images[0].rows}×{images[0].cols} patches)" in first
        await pilot.press("i")
        await pilot.pause()
        assert screen.sel.image == 1
        second = text_of(view, width=130)
        assert f"image 1 ({images[1].rows}×{images[1].cols} patches)" in second
        assert "peak row" in second and second != first
        await pilot.press("i")
        assert screen.sel.image == 0  # wraps around


async def test_keys_typed_in_one_burst_reach_the_bar_then_the_run(demo):
    """`:break sync⏎c` arriving before the app turns round once (a busy machine, a fast typist, a paste)."""
    from textual import events

    app = build_app(loaded=demo, image_paths=[IMAGE], prompt=PROMPT, max_new_tokens=3)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await wait_for(pilot, _paused_at(screen, "preprocess"))
        for ch in ":break sync":
            app.post_message(events.Key({":": "colon", " ": "space"}.get(ch, ch), ch))
        app.post_message(events.Key("enter", "\r"))
        app.post_message(events.Key("c", "c"))
        await wait_for(pilot, _paused_at(screen, "sync"), what="c continued to the new breakpoint")
        assert screen.breakpoints == {"preprocess", "sync"}
        assert screen.query_one(CommandBar).value == "" and not screen.query_one(CommandBar).has_focus
