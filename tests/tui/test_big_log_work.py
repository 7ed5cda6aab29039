"""A large runtime log on the batch screen: headers give the log's true totals and say when a panel is a page of
them; `o` draws the timeline in a worker with a progress bar, and keys pressed meanwhile act, in order, afterwards."""

from __future__ import annotations

import asyncio
import time

import pytest
from textual import events

from qdebug.tui import timeline_page
from qdebug.tui.app import build_app
from qdebug.tui.screens.batch import BatchScreen
from qdebug.tui.screens.timeline_picture import TimelinePictureScreen
from qdebug.tui.widgets.prerendered import PrerenderedLines
from qdebug.tui.widgets.request_table import RequestTable

from .conftest import SIZE, wait_for


@pytest.fixture(scope="module")
def big_log(tmp_path_factory):
    """A 60,000-line log (about 6,500 requests, 27,000 events): more than a report holds in memory."""
    from tests.logs.log_synth import generate_log

    folder = tmp_path_factory.mktemp("biglog")
    truth = generate_log(folder / "svc.log", 60_000, seed=5)
    return folder, truth


def _report(big_log, monkeypatch):
    folder, _truth = big_log
    monkeypatch.setenv("QDEBUG_CACHE_DIR", str(folder / "cache"))
    from qdebug.commands.log_replay import make_filter, run_log_replay

    return run_log_replay([folder / "svc.log"], make_filter(None, None, None, None))


async def _until(condition, timeout: float = 120.0, what: str = "") -> None:
    """Wait on the event loop alone (a pilot pause waits for the screen's messages, and so for the worker)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or condition}")
        await asyncio.sleep(0.005)


async def test_headers_give_the_logs_true_totals_and_say_the_table_is_a_page(big_log, monkeypatch):
    report = _report(big_log, monkeypatch)
    _folder, truth = big_log
    assert len(report.requests) == 2_000 < truth.requests  # the report holds a page; the index the rest
    bad = sum(n for v, n in report.log_index.verdict_counts().items() if v != "ok")
    app = build_app(report=report)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await wait_for(pilot, lambda: screen.totals is not None, what="the log's totals")
        await pilot.pause()
        title = str(screen.query_one("#info").render())
        table_title = screen.query_one(RequestTable).border_title
    assert f"{truth.requests:,} requests, {bad:,} not ok" in title, title
    assert "2000 requests" not in title and "2,000 requests" not in title
    assert f"requests 1–2,000 of {truth.requests:,} (worst first)" in table_title, table_title


async def test_o_draws_in_a_worker_and_keys_pressed_meanwhile_act_in_order_afterwards(big_log, monkeypatch):
    report = _report(big_log, monkeypatch)
    _folder, truth = big_log
    monkeypatch.setenv("QDEBUG_PIXELS", "off")  # the timeline as text, a page at a time
    monkeypatch.setattr(timeline_page, "PAGE", 3_000)  # pages big enough that drawing one takes a noticeable while
    app = build_app(report=report)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, BatchScreen)
        ticks, stop = [], False

        async def tick() -> None:  # the UI's event loop keeps turning while the page is drawn
            while not stop:
                ticks.append(time.perf_counter())
                await asyncio.sleep(0.005)

        ticker = asyncio.create_task(tick())
        app.post_message(events.Key("o", "o"))  # as typed: nothing waits for the app to be idle
        await _until(lambda: isinstance(app.screen, TimelinePictureScreen), what="the timeline screen")
        screen = app.screen
        assert screen.busy and screen.query_one("#picture-progress").display  # drawing, with a progress bar
        started = time.perf_counter()
        for key in ("right_square_bracket", "down", "down"):
            app.post_message(events.Key(key, None))
        await _until(lambda: len(screen.waiting) == 3 or not screen.busy, what="the keys")
        assert screen.busy and screen.waiting == ["right_square_bracket", "down", "down"]  # pressed during the work, kept
        await _until(lambda: not screen.busy and not screen.waiting, what="the drawing and the keys")
        drawn = time.perf_counter()
        during = [t for t in ticks if started <= t <= drawn]
        lines = screen.query_one(PrerenderedLines)
        await _until(lambda: lines.scroll_offset.y == 2, timeout=10, what="two lines down")
        stop = True
        await ticker
        heading = str(screen.query_one("#timeline-heading").render())
        assert not screen.query_one("#picture-progress").display
    # `]` drew page 2, then both `down`s scrolled it (out of order, page 2 would have opened at its top)
    assert screen.page == 1 and lines.scroll_offset.y == 2
    assert f"events 3,001–6,000 of {truth.events:,} · page 2/{-(-truth.events // 3_000):,}" in heading, heading
    assert f"of {truth.requests:,} requests" in heading
    gaps = [b - a for a, b in zip(during, during[1:])]
    print(f"two pages and the keys took {drawn - started:.2f} s; the UI loop turned {len(during)} times meanwhile, "
          f"longest gap {max(gaps) * 1000:.0f} ms")
    assert drawn - started > 0.2  # the work took noticeably long ...
    assert len(during) > 10  # ... and the UI kept turning through it


async def test_escape_while_drawing_goes_back_at_once(big_log, monkeypatch):
    report = _report(big_log, monkeypatch)
    monkeypatch.setenv("QDEBUG_PIXELS", "off")
    monkeypatch.setattr(timeline_page, "PAGE", 3_000)
    app = build_app(report=report)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.post_message(events.Key("o", "o"))
        await _until(lambda: isinstance(app.screen, TimelinePictureScreen), what="the timeline screen")
        screen = app.screen
        assert screen.busy
        app.post_message(events.Key("escape", None))
        await _until(lambda: isinstance(app.screen, BatchScreen), what="the batch screen")
        assert screen.busy  # back before the drawing ended: Escape needs no drawing
        await pilot.press("down")  # the batch screen works as before
        assert app.screen.query_one(RequestTable).cursor_row == 1
