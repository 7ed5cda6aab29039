"""`qdebug watch DIR`'s live view, headless: the checks table and the latest findings come from the folder the plugin
writes (its counter files and findings log, written here by the plugin's own writers), and Enter on a finding opens
its recorded trace in the request screen."""

from __future__ import annotations

import shutil

from textual.widgets import DataTable

from qdebug.commands.watch import WatchArgs
from qdebug.engine.watch_log import FindingsLog, WatchFinding, read_findings
from qdebug.engine.watch_metrics import WatchCounters
from qdebug.tui.screens.request import RequestScreen
from qdebug.tui.watch_app import build_watch_app
from qdebug.vocab import WATCH_CHECKS

from tests.metrics_text import metrics_server

from .conftest import SIZE, TRACE, wait_for


def _folder(tmp_path):
    """A watch folder: 40 placement checks with 2 violations, one of them with a recorded trace where the flight recorder
    writes it (`traces/NAME.qdt`, the finding's `trace` relative to the folder), and 10 counts checks."""
    (tmp_path / "traces").mkdir()
    shutil.copy(TRACE, tmp_path / "traces" / "req-b.qdt")
    counters = WatchCounters(str(tmp_path), "run1")
    for i in range(40):
        counters.add("placement", seconds=0.001, violations=int(i in (7, 30)))
    for _ in range(10):
        counters.add("counts", seconds=0.0001)
    counters.flush()
    log = FindingsLog(str(tmp_path), 1 << 20)
    log.add(WatchFinding("placement", "violation", "sync", "req-a", "item 0 (image): 24 of 24 rows ...", donors=["req-c"]))
    log.add(WatchFinding("placement", "violation", "sync", "req-b", "item 0 (image): 24 of 24 rows ...", donors=["req-a"],
                         trace="traces/req-b.qdt"))
    log.drain()
    return counters


def _cells(table: DataTable) -> list[list[str]]:
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


async def test_the_live_view_shows_the_folders_counters_and_opens_a_findings_trace(tmp_path):
    counters = _folder(tmp_path)
    app = build_watch_app(WatchArgs(source=str(tmp_path)), interval=60)
    async with app.run_test(size=SIZE) as pilot:
        checks = app.screen.query_one("#watch-checks", DataTable)
        found = app.screen.query_one("#watch-findings", DataTable)
        await wait_for(pilot, lambda: checks.row_count == len(WATCH_CHECKS) and found.row_count == 2, what="the first reading")
        rows = {r[0]: r for r in _cells(checks)}
        assert rows["placement"][1:4] == ["40", "2", "0"] and rows["counts"][1:3] == ["10", "0"], rows  # totals
        assert _totals(app).startswith("in all: 50 checks, 2 violations, 0 errors"), _totals(app)
        assert [r[3] for r in _cells(found)] == ["req-b", "req-a"]  # newest first
        assert "donors req-a" in _cells(found)[0][5] and _cells(found)[0][6] == "traces/req-b.qdt"
        assert _cells(found)[1][6].startswith("no trace: not recorded")  # why, never a bare "-"
        await pilot.press("r")  # a reading with nothing new, then more traffic with five more violations: the last
        await wait_for(pilot, lambda: len(app.screen.history) == 2, what="the second reading")  # reading's rates and sparkline
        for _ in range(5):  # more traffic, three more violations: the next reading's rates and sparkline show them
            counters.add("placement", seconds=0.001, violations=1)
        counters.add("placement", seconds=0.001)
        counters.flush()
        await pilot.press("r")
        await wait_for(pilot, lambda: {r[0]: r for r in _cells(checks)}["placement"][2] == "7", what="the third reading")
        placement = {r[0]: r for r in _cells(checks)}["placement"]
        assert placement[1] == "46" and float(placement[4]) > 0 and float(placement[5]) > 0 and placement[7] == "▁█", placement
        await pilot.press("r")  # between bursts: nothing new, and the rates still say what the readings held saw
        await wait_for(pilot, lambda: len(app.screen.history) == 4, what="the fourth reading")
        placement = {r[0]: r for r in _cells(checks)}["placement"]
        assert float(placement[4]) > 0 and float(placement[5]) > 0 and placement[7] == "▁█▁", placement
        assert "checks/s" in _totals(app) and _totals(app).startswith("in all: 56 checks, 7 violations"), _totals(app)
        found.move_cursor(row=1)
        await pilot.press("enter")
        assert "no trace was recorded for req-a" in str(app.screen.query_one("MessageLine").message[0])
        found.move_cursor(row=0)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RequestScreen) and bool(app.screen.query("#detail")), what="the request screen")
        assert app.screen.doc.source == str(tmp_path / "traces" / "req-b.qdt")


async def test_long_donor_lists_are_capped_and_said_whole_and_a_check_after_the_decoder_says_why_no_trace(tmp_path):
    """Forty donors of a long id each: the row is cut to the screen (the time column stays on it), the message line says
    the row whole; a layout violation's trace cell says the check runs after the step's decoder."""
    WatchCounters(str(tmp_path), "run1").flush()
    donors = [f"chatcmpl-{i:04d}-{'x' * 40}" for i in range(40)]
    log = FindingsLog(str(tmp_path), 1 << 20)
    log.add(WatchFinding("layout", "violation", "layer.2", "req-l", "layer 2's attention kernel received its value rows head-first"))
    log.add(WatchFinding("placement", "violation", "sync", "req-d", "item 0 (image): 24 of 24 rows ...", donors=donors))
    log.drain()
    app = build_watch_app(WatchArgs(source=str(tmp_path)), interval=60)
    async with app.run_test(size=SIZE) as pilot:
        found = app.screen.query_one("#watch-findings", DataTable)
        await wait_for(pilot, lambda: found.row_count == 2, what="the first reading")
        placement, layout = _cells(found)
        assert placement[5].startswith("donors chatcmpl-0000") and placement[5].endswith("…") and placement[0][2] == ":"
        assert layout[6] == "no trace: this check runs after the step's decoder"
        assert found.virtual_size.width <= found.size.width, (found.virtual_size, found.size)  # no column pushed off screen
        (logged,) = [f for f in read_findings(str(tmp_path)) if f.check == "placement"]  # as many donors as the log keeps
        await wait_for(pilot, lambda: logged.donors[-1] in str(app.screen.query_one("MessageLine").message[0]), what="the row said whole")
        said = str(app.screen.query_one("MessageLine").message[0])
        assert len(logged.donors) > 10 and all(d in said for d in logged.donors) and "no trace: not recorded; one recording per" in said
        found.move_cursor(row=1)
        await wait_for(pilot, lambda: "recorder traces the next new requests" in str(app.screen.query_one("MessageLine").message[0]))


def _totals(app) -> str:
    return str(app.screen.query_one("#watch-totals").render())


async def test_enter_opens_the_recorded_trace_from_a_servers_url_with_its_findings_folder(tmp_path):
    """`qdebug watch URL --findings DIR`: the counts are the server's, the findings and their traces the folder's."""
    _folder(tmp_path)
    metrics = ('qdebug_watch_checks_total{check="placement"} 40.0\nqdebug_watch_violations_total{check="placement"} 2.0\n'
               'qdebug_watch_errors_total{check="placement"} 0.0\nqdebug_watch_check_seconds_total{check="placement"} 0.04\n')
    with metrics_server(metrics) as url:
        app = build_watch_app(WatchArgs(source=url, findings=str(tmp_path)), interval=60)
        async with app.run_test(size=SIZE) as pilot:
            found = app.screen.query_one("#watch-findings", DataTable)
            await wait_for(pilot, lambda: found.row_count == 2, what="the first reading")
            found.move_cursor(row=0)
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, RequestScreen) and bool(app.screen.query("#detail")), what="the request screen")
            assert app.screen.doc.source == str(tmp_path / "traces" / "req-b.qdt")


async def test_a_trace_path_that_leaves_the_watch_folder_is_refused_in_one_line(tmp_path):
    """A findings log is a file on disk: a `trace` field naming ../ outside the folder is not opened."""
    (tmp_path / "w").mkdir()
    (tmp_path / "outside.qdt").write_bytes(TRACE.read_bytes())
    log = FindingsLog(str(tmp_path / "w"), 1 << 20)
    log.add(WatchFinding("placement", "violation", "sync", "req-x", "item 0 ...", trace="../outside.qdt"))
    log.drain()
    app = build_watch_app(WatchArgs(source=str(tmp_path / "w")), interval=60)
    async with app.run_test(size=SIZE) as pilot:
        found = app.screen.query_one("#watch-findings", DataTable)
        await wait_for(pilot, lambda: found.row_count == 1, what="the first reading")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "leaves the watch folder" in str(app.screen.query_one("MessageLine").message[0]))
        assert not isinstance(app.screen, RequestScreen)
