"""The batch screen on runtime logs: a small log whole, a large one paged from its index."""

from __future__ import annotations

from pathlib import Path

from qdebug.tui.app import build_app
from qdebug.tui.screens.batch import BatchScreen
from qdebug.tui.widgets.contamination_view import ContaminationView
from qdebug.tui.widgets.event_timeline import EventTimeline
from qdebug.tui.widgets.log_pager import LogEventPager
from qdebug.tui.widgets.request_table import RequestTable

from .conftest import SIZE, text_of, wait_for

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "burst.log"


def _log_report(paths, tmp_path, monkeypatch):
    monkeypatch.setenv("QDEBUG_CACHE_DIR", str(tmp_path / "cache"))
    from qdebug.commands.log_replay import make_filter, run_log_replay

    return run_log_replay([Path(p) for p in paths], make_filter(None, None, None, None))


async def test_small_log_shows_timeline_and_sparse_cells(tmp_path, monkeypatch):
    report = _log_report([SAMPLE], tmp_path, monkeypatch)
    app = build_app(report=report)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, BatchScreen)
        assert app.screen.query_one(RequestTable).row_count == 8
        assert app.screen.query(EventTimeline) and not app.screen.query(LogEventPager)
        cells = text_of(app.screen.query_one(ContaminationView), width=120)
        assert "42 ◀ 43's rows" in cells and "45 ◀ 46's rows" in cells and "line 14" in cells


async def test_large_log_pages_events_from_the_index(tmp_path, monkeypatch):
    from tests.logs.log_synth import generate_log

    log = tmp_path / "svc.log"
    truth = generate_log(log, 40_000, seed=9)
    report = _log_report([log], tmp_path, monkeypatch)
    assert len(report.events) < truth.events  # the report holds one page; the index holds the rest
    app = build_app(report=report)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        pager = app.screen.query_one(LogEventPager)
        first = text_of(pager, width=130)
        assert f"events 1–200 of {truth.events:,}" in first
        await pilot.press("right_square_bracket")
        await wait_for(pilot, lambda: pager.page == 1)
        assert "events 201–400" in text_of(pager, width=130)
        await pilot.press("right_curly_bracket")
        await wait_for(pilot, lambda: pager.page == pager.pages - 1)
        last = text_of(pager, width=130)
        assert f"of {truth.events:,}" in last and f"–{truth.events:,} of" in last
        await pilot.press("left_curly_bracket")
        await wait_for(pilot, lambda: pager.page == 0)
        # the worst requests come first in the table: contaminated ones with their donors
        table = app.screen.query_one(RequestTable)
        top = [str(c) for c in table.get_row_at(0)]
        assert top[1] == "contaminated" and top[2] == truth.contaminated[top[0]]


async def test_o_shows_the_offset_timeline_picture_where_the_terminal_shows_pixels(tmp_path, monkeypatch):
    from qdebug.tui.screens.timeline_picture import TimelinePictureScreen

    report = _log_report([SAMPLE], tmp_path, monkeypatch)
    monkeypatch.setenv("QDEBUG_PIXELS", "sixel")  # as a Sixel terminal (headless, the picture is drawn in half cells)
    app = build_app(report=report)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("o")
        await wait_for(pilot, lambda: isinstance(app.screen, TimelinePictureScreen))
        screen = app.screen
        await wait_for(pilot, lambda: screen.picture is not None and screen.query("#picture"), what="the picture")
        assert screen.picture.width > 600 and screen.picture.height > 300
        # the picture is the PNG `qdebug replay LOG --timeline-png` writes (the command, not the function the screen
        # calls), and that PNG labels every overwrite the log's own lines report (writer→previous owner@offset)
        import re

        from PIL import Image, ImageChops
        from typer.testing import CliRunner

        from qdebug.cli import app as cli
        from qdebug.render.offset_timeline import drawn_labels

        png = tmp_path / "t.png"
        assert CliRunner().invoke(cli, ["replay", str(SAMPLE), "--timeline-png", str(png)]).exit_code == 1  # contamination found
        with Image.open(png) as im:
            assert ImageChops.difference(im.convert("RGB"), screen.picture).getbbox() is None
        overwrites = re.findall(r"request_id=(\d+) overwrote buffer at offset (\d+).*\(previously (\d+)\)", SAMPLE.read_text())
        labels = drawn_labels(png)
        assert overwrites and all(any(label.startswith(f"{new}→{old}@{offset}") for label in labels) for new, offset, old in overwrites), labels
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, BatchScreen))


def _plain(renderable, width: int) -> str:
    import io

    from rich.console import Console

    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(renderable)
    return console.file.getvalue()


async def test_o_without_pixels_draws_the_timeline_as_text(tmp_path, monkeypatch):
    """Half blocks would smudge the picture's labels: lanes and glyphs instead, each overwrite with its donor."""
    from qdebug.tui.screens.timeline_picture import TimelinePictureScreen
    from qdebug.vocab import EventKind

    report = _log_report([SAMPLE], tmp_path, monkeypatch)
    monkeypatch.setenv("QDEBUG_PIXELS", "off")
    app = build_app(report=report)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("o")
        await wait_for(pilot, lambda: isinstance(app.screen, TimelinePictureScreen))
        await pilot.pause()
        screen = app.screen
        assert not screen.query("#picture") and screen.picture is None
        status = str(screen.query_one("#picture-status").content)
        body = _plain(screen.query_one("#timeline-lanes").content, SIZE[0])
    assert "as text" in status and "--timeline-png" in status
    assert "▀" not in body and "▄" not in body
    lanes = {line.split("│")[1].strip(): line for line in body.splitlines() if line.count("│") >= 3}
    for e in report.events:
        if e.kind == EventKind.BUFFER_OVERWRITE:
            assert f"←{e.donor}@{e.offset}" in lanes[e.request_id], (e.request_id, lanes.get(e.request_id))
    assert "ms since the first event" in body  # the lanes' time axis, as the picture's


async def test_replayed_log_shows_times_as_ms_since_its_first_event(tmp_path, monkeypatch, trace):
    """`:replay burst.log`: times read from the first event on, its wall-clock start as the log wrote it (as the PNG)."""
    import re

    from qdebug.tui.widgets.command_bar import CommandBar

    monkeypatch.setenv("QDEBUG_CACHE_DIR", str(tmp_path / "cache"))
    app = build_app(trace=trace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("colon")
        app.screen.query_one(CommandBar).value = f"replay {SAMPLE}"
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, BatchScreen), timeout=120, what="the log's batch screen")
        timeline = text_of(app.screen.query_one(EventTimeline), width=130)
    listed = [float(m) for m in re.findall(r"^\s*(\d+(?:\.\d+)?)ms ", timeline, re.M)]
    assert listed and listed[0] == 0.0 and max(listed) < 1000  # the burst lasts under a second, never epoch ms
    assert "ms since the first event (2024-07-12T14:23:07.103 UTC)" in timeline  # 41's encode, the first event line
    assert "1720794187" not in timeline
