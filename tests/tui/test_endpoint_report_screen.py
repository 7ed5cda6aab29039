"""An endpoint replay's report on the batch screen, saved as a .qdr and opened again: its matrix in the CLI's words (answers,
not encoder rows), its verdicts with their stage, and Enter on a request opening its runs three ways (the engine in the
burst judged, the engine alone, the local model), or saying why it cannot."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from qdebug.render.replay_report import replay_renderables
from qdebug.replay.report import RequestOutcome, ReplayReport, load_report, save_report
from qdebug.tui.app import build_app
from qdebug.tui.screens.batch import BatchScreen
from qdebug.tui.screens.request import RequestScreen
from qdebug.tui.widgets.contamination_view import ContaminationView
from qdebug.tui.widgets.message_line import MessageLine
from qdebug.tui.widgets.request_table import RequestTable
from qdebug.tui.widgets.stage_detail import StageDetail
from qdebug.vocab import Verdict

from .conftest import SIZE, text_of, wait_for

IDS = ["req-01", "req-02", "req-03", "req-04"]


def _endpoint_report(report, *, traced: bool = True) -> ReplayReport:
    """A report shaped as `replay --endpoint --engine-traces --model` writes it, over the demo's real traces: req-04's
    engine rows were req-02's at sync in burst 2 (its answers never showed it: a .00 cell), req-03 batch-dependent at
    encode in burst 1."""
    t = report.traces
    outcomes = [
        RequestOutcome(id="req-01", reference="a", replayed="a", verdict=Verdict.OK, burst_answers=["a", "a"], burst_verdicts=["ok", "ok"],
                       burst_donors=[[], []]),
        RequestOutcome(id="req-02", reference="b", replayed="b", verdict=Verdict.OK, burst_answers=["b", "b"], burst_verdicts=["ok", "ok"],
                       burst_donors=[[], []]),
        RequestOutcome(id="req-03", reference="c", replayed="c2", verdict=Verdict.BATCH_DEPENDENT, stage="encode",
                       burst_answers=["c2", "c"], burst_verdicts=["batch_dependent", "ok"], burst_donors=[[], []],
                       burst_stages=["encode", None], co_batched=[["req-01"], []]),
        RequestOutcome(id="req-04", reference="d", replayed="d", verdict=Verdict.CONTAMINATED, donor="req-02", stage="sync",
                       burst_answers=["d", "d"], burst_verdicts=["ok", "contaminated"], burst_donors=[[], ["req-02"]],
                       burst_stages=[None, "sync"],
                       # text@ and visual@ from the engine's trace, as a report saved before they named a donor holds them
                       text_offset=3, visual_offset=3, images=[{"index": 0, "text_offset": 3, "visual_offset": 3, "rows": 9}]),
    ]
    matrix = [[1.0 if i == j else 0.0 for j in range(4)] for i in range(4)]
    matrix[2][0] = 0.5  # req-03 answered req-01's answer in one burst of two
    extra: dict = {"matrix_of": "answers", "served_model": "demo"}
    out = ReplayReport(source="capture.jsonl", kind="capture", mode="endpoint", requests=outcomes, contamination_ids=IDS,
                       contamination=matrix, endpoint="http://127.0.0.1:9", repeats=2, extra=extra)
    if traced:
        extra["engine_traces"] = {"folder": "/srv/traces", "said": "engine traces: read 12 of 12", "judged_bursts": {
            "req-01": 1, "req-02": 1, "req-03": 1, "req-04": 2}}
        for rid, (burst, alone, local) in zip(IDS, [(t["a"], t["b"], t["c"])] * 4):
            out.traces[rid], out.engine_alone[rid], out.references[rid] = burst, alone, local
    return out


def _cli_text(report) -> str:
    console = Console(file=io.StringIO(), width=260, color_system=None)
    for part in replay_renderables(report):
        console.print(part)
    return console.file.getvalue()


async def test_a_saved_endpoint_report_opens_each_request_three_ways_in_the_clis_words(report, tmp_path):
    path = save_report(_endpoint_report(report), tmp_path / "r.qdr")
    saved = load_report(path)
    assert set(saved.engine_alone) == set(saved.traces) == set(saved.references) == set(IDS)
    assert saved.extra["engine_traces"]["judged_bursts"]["req-04"] == 2  # an endpoint's own keys come back from the .qdr
    cli = _cli_text(saved)
    app = build_app(report=saved, source=str(path))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, BatchScreen)
        table = app.screen.query_one(RequestTable)
        matrix = " ".join(text_of(app.screen.query_one(ContaminationView), width=120).split())
        # the matrix is the CLI's: its title and corner, never the encoder rows' cosines
        assert "answers: share of bursts in which request (row) answered what column answered alone" in matrix
        flat = " ".join(cli.split())  # the CLI's title, wrapped over the table's width
        assert "answers: share of bursts in which request (row) answered what column answered alone" in flat
        assert "request \\ answer of" in matrix and "request \\ answer of" in flat
        assert "encoder rows" not in matrix and "cosine" not in matrix and "stream" not in matrix
        # the donor line says the verdict with its stage and that the answers never showed it (the .00 cell)
        assert "4 req-04 ◀ req-02: contaminated @sync; answered req-02's answer in 0% of bursts" in matrix, matrix
        for r in saved.requests:  # the verdict column is the CLI's: `verdict @stage`, and the same donor
            row = [str(c) for c in table.get_row(r.id)]
            cli_row = next(line for line in cli.splitlines() if line.startswith(f"│ {r.id} "))
            cells = [c.strip() for c in cli_row.strip("│").split("│")]
            assert row[1] in cells and row[1] == (f"{r.verdict} @{r.stage}" if r.stage else r.verdict), (row, cells)
            assert (row[2] if row[2] != "–" else "") in cells, (row, cells)
        table.move_cursor(row=3)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RequestScreen), what="the request screen")
        screen = app.screen
        assert [d.role for d in screen.documents.docs] == ["engine, burst 2", "engine alone", "local model (reference)"]
        assert screen.doc.trace is saved.traces["req-04"] and screen.query_one("StageList").rows
        await wait_for(pilot, lambda: screen.sel.stage is not None)
        screen.select(stage="sync")
        await wait_for(pilot, lambda: screen.query_one(StageDetail).text.startswith("sync"), what="the sync stage's detail")
        detail = screen.query_one(StageDetail).text
        assert "vs engine alone" in detail and "vs local model (reference)" in detail and "the report's verdict: contaminated @sync" in detail, detail
        for role, trace in (("engine alone", saved.engine_alone["req-04"]), ("local model (reference)", saved.references["req-04"]),
                            ("engine, burst 2", saved.traces["req-04"])):
            await pilot.press("t")
            assert screen.doc.role == role and screen.doc.trace is trace


@pytest.mark.parametrize("case, said", [
    ("untraced", "this endpoint replay did not ask for the engine's traces"),
    ("left-out", "its traces were left out of this .qdr (the report's traces passed QDEBUG_REPORT_TRACE_MB=1 MiB)"),
])
async def test_enter_on_an_endpoint_request_without_traces_says_why(report, tmp_path, monkeypatch, case, said):
    monkeypatch.setenv("QDEBUG_REPORT_TRACE_MB", "1")  # three ~120 KiB traces a request: the fourth's pass 1 MiB
    path = save_report(_endpoint_report(report, traced=case != "untraced"), tmp_path / "r.qdr")
    saved = load_report(path)
    if case == "left-out":
        kept = len(saved.traces)  # the first requests' traces whole, the rest listed
        assert 0 < kept < 4 and saved.traces_left_out == IDS[kept:] and set(saved.traces) == set(IDS[:kept]) == set(saved.engine_alone)
    app = build_app(report=saved, source=str(path))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.screen.query_one(RequestTable).move_cursor(row=3)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen.query_one(MessageLine).message[0] != "", what="the message")
        text, error = app.screen.query_one(MessageLine).message
        assert error and said in text and "runtime logs" not in text, text
        assert isinstance(app.screen, BatchScreen)
