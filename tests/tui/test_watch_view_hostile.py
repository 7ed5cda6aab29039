"""Issue 49 items 7 and 12 in `qdebug watch DIR`'s live view: it reads through the same bounded readers as `--once`
(a FIFO as findings.log is a message line, not a reading that never ends), and shows a row for every check the
counters name, as data (a `[/x]` in a name is text, never markup)."""

from __future__ import annotations

import json
import os

from textual.widgets import DataTable

from qdebug.commands.watch import WatchArgs
from qdebug.engine.watch_metrics import WatchCounters
from qdebug.tui.watch_app import build_watch_app

from .conftest import SIZE, wait_for


def _message(app) -> str:
    return str(app.screen.query_one("MessageLine").message[0])


async def test_a_fifo_findings_log_is_said_on_the_message_line(tmp_path):
    WatchCounters(str(tmp_path), "run").flush()
    fifo = tmp_path / "findings.log"
    os.mkfifo(fifo)
    app = build_watch_app(WatchArgs(source=str(tmp_path)), interval=60)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: "findings.log is a FIFO" in _message(app), timeout=20, what="the FIFO refused")
            assert app.screen.query_one("MessageLine").message[1] is True
    finally:
        try:  # a reader stuck on the FIFO (the bug) is let go, so a failing test still ends
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass


async def test_every_counted_check_has_a_row_and_its_name_is_data(tmp_path):
    counters = {s: {"placement": 0} for s in ("checks", "violations", "errors", "seconds")}
    counters["checks"]["x[/bad]"], counters["violations"]["x[/bad]"] = 5, 3  # a check this qdebug does not know
    (tmp_path / "metrics-run-1.json").write_text(json.dumps(counters))
    app = build_watch_app(WatchArgs(source=str(tmp_path)), interval=60)
    async with app.run_test(size=SIZE) as pilot:
        checks = app.screen.query_one("#watch-checks", DataTable)
        await wait_for(pilot, lambda: "violation(s)" in _message(app), what="the first reading")
        rows = {str(checks.get_row_at(i)[0]): [str(c) for c in checks.get_row_at(i)] for i in range(checks.row_count)}
        assert rows["x[/bad]"][2] == "3", rows  # its violations
        assert _message(app).startswith("3 violation(s)"), _message(app)
