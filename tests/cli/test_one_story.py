"""One run, one story (issue 36): the JSON, the Rich report, the TUI's View and the PNG's labels of the same run name the
same verdicts, donors and offsets, for the sample run of each command."""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qdebug.cli import app
from qdebug.render.offset_timeline import drawn_labels
from qdebug.render.png_text import read_text_boxes
from tests.engine.conftest import traced_server, vllm_py  # noqa: F401 (the real vLLM of the endpoint story, marked vllm)

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_data"
IMAGE = SAMPLE / "red_circle_top_left.png"
PROMPT = "Describe the image."
WIDE = {"COLUMNS": "260"}  # a table row's cells on one line
SYNC_LABEL = re.compile(r"^\S+ (?P<rid>\S+): visual@(?P<visual>\d+|–)(?: text@(?P<text>\d+))?(?: rows of (?P<donor>\S+))?$")
RICH_SYNC = re.compile(r"S@(?P<visual>[\d,–]+)(?:←(?P<donor>\S+))?")


@dataclass
class Run:
    """What one CLI run wrote: the terminal text, the JSON, the PNG, and the saved report (replays)."""

    text: str
    data: dict
    png: Path
    saved: Path | None = None


def _invoke(*args: str) -> str:
    result = CliRunner().invoke(app, list(args), env=WIDE)
    assert result.exit_code in (0, 1), result.output  # 1: the run found what the story is about
    return result.output


def _replay(tmp: Path, *args: str) -> Run:
    out, png, saved = tmp / "r.json", tmp / "t.png", tmp / "r.qdr"
    text = _invoke("replay", *args, "--json", str(out), "--timeline-png", str(png), "--save", str(saved))
    return Run(text, json.loads(out.read_text()), png, saved)


@pytest.fixture(scope="module")
def injected(tmp_path_factory) -> Run:
    """The README's injected replay of the sample capture (seed 0: req-06 gets req-08's rows)."""
    return _replay(tmp_path_factory.mktemp("injected"), str(SAMPLE / "capture.jsonl"), "--inject", "shared-visual-buffer", "--seed", "0")


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> Run:
    """The sample capture replayed without a fault."""
    return _replay(tmp_path_factory.mktemp("clean"), str(SAMPLE / "capture.jsonl"))


def _story(data: dict) -> dict[str, tuple[str, str | None, str]]:
    """request → (verdict, donor, visual offsets as the table writes them) from the JSON."""
    def visual(r):
        images = r.get("images") or []
        if len(images) > 1:
            return ",".join("–" if i["visual_offset"] is None else str(i["visual_offset"]) for i in images)
        return "–" if r["visual_offset"] is None else str(r["visual_offset"])
    return {r["id"]: (r["verdict"], r["donor"] or None, visual(r)) for r in data["requests"]}


def _table_rows(text: str, ids: set[str]) -> dict[str, dict[str, str]]:
    """The Rich requests table's cells by column name, for each request's first line."""
    lines = text.splitlines()
    header = next(line for line in lines if re.match(r"^┃ id\s+┃", line))
    names = [c.strip() for c in header.strip("┃").split("┃")]
    rows = {}
    for line in lines:
        cells = [c.strip() for c in line.strip().strip("│").split("│")]
        if len(cells) == len(names) and cells[0] in ids and cells[0] not in rows:
            rows[cells[0]] = dict(zip(names, cells))
    return rows


def _timeline_rows(text: str, ids: set[str]) -> dict[str, str]:
    """The Rich timeline's events cell of each request."""
    start = text.index("events in time order")
    rows = {}
    for line in text[start:].splitlines():
        cells = [c.strip() for c in line.strip().strip("│").split("│")]
        if len(cells) == 2 and cells[0] in ids:
            rows.setdefault(cells[0], cells[1])
    return rows


def _flat(text: str) -> str:
    """Terminal text with box borders and wrapping taken out (a wrapped finding reads as one sentence)."""
    return " ".join(text.replace("│", " ").split())


def _tui_story(saved: Path, open_ids: list[str]) -> tuple[dict, str, dict]:
    """From the TUI on the saved report: the request table's (verdict, donor, visual@) per request, the event list,
    and for each of `open_ids` the View's measured outcome and the sync stage's detail text on its request screen."""
    from qdebug.replay.report import load_report
    from qdebug.tui.app import build_app
    from qdebug.tui.screens.batch import BatchScreen
    from qdebug.tui.screens.request import RequestScreen
    from qdebug.tui.widgets.event_timeline import timeline_text
    from qdebug.tui.widgets.offset_strip import timeline_renderable
    from qdebug.tui.widgets.request_table import RequestTable
    from qdebug.tui.widgets.stage_detail import StageDetail
    from qdebug.vocab import StageName

    report = load_report(saved)
    opened: dict = {}

    async def drive() -> tuple[dict, str]:
        tui = build_app(report=report)
        async with tui.run_test(size=(200, 50)) as pilot:
            await pilot.pause()
            assert isinstance(tui.screen, BatchScreen)
            table = tui.screen.query_one(RequestTable)
            rows = {}
            for key in table.rows:
                cells = [str(c) for c in table.get_row(key)]
                rows[cells[0]] = (cells[1], None if cells[2] == "–" else cells[2], cells[4])
            events = timeline_text(report, 200, None).plain
            for rid in open_ids:
                keys = [str(k.value) for k in table.rows]
                table.move_cursor(row=keys.index(rid))
                await pilot.pause()
                await pilot.press("enter")
                for _ in range(400):
                    if isinstance(tui.screen, RequestScreen):
                        break
                    await pilot.pause(0.02)
                screen = tui.screen
                screen.select_stage(StageName.SYNC)
                await pilot.pause()
                detail = screen.query_one(StageDetail)
                for _ in range(200):
                    if detail.text.startswith(StageName.SYNC):
                        break
                    await pilot.pause(0.02)
                opened[rid] = (screen.view(), detail.text, timeline_renderable(screen.view(), 200).plain)
                await pilot.press("escape")
                for _ in range(400):
                    if isinstance(tui.screen, BatchScreen):
                        break
                    await pilot.pause(0.02)
                table = tui.screen.query_one(RequestTable)
            await pilot.press("q")
        return rows, events

    rows, events = asyncio.run(drive())
    return rows, events, opened


def _check_replay(run: Run, open_ids: list[str]) -> None:
    """Every view of one replay against its JSON: verdicts, donors, visual offsets."""
    story = _story(run.data)
    ids = set(story)
    # Rich: the requests table and the timeline's syncs
    table = _table_rows(run.text, ids)
    assert set(table) == ids, run.text
    for rid, (verdict, donor, visual) in story.items():
        cells = table[rid]
        assert (cells["verdict"].split()[0], cells["donor"] or None, cells["visual@"]) == (verdict, donor, visual), (rid, cells)
    timeline = _timeline_rows(run.text, ids)
    assert set(timeline) == ids, run.text  # every request has its row: the loop below checks each one
    for rid, cell in timeline.items():
        synced = RICH_SYNC.search(cell)
        assert synced, (rid, cell)
        assert (synced["visual"], synced["donor"]) == (story[rid][2], story[rid][1]), (rid, cell, story[rid])
        assert "O←" not in cell, (rid, cell)  # no overwrite drawn from the fault's own labels
    # Findings (JSON and terminal): a contaminated request's finding names its donor; no finding names another donor
    flat = _flat(run.text)
    for f in run.data["findings"]:
        if f["kind"] in ("contamination", "mixed_rows") and f["request_id"] in ids:
            assert f["donor"] == story[f["request_id"]][1], f
            assert _flat(f["message"])[:60] in flat, f["message"]
        assert f["kind"] != "overwrite", f  # in a replay, overwrites are the fault's labels: never a finding
    # PNG: each sync label names the visual offset and donor of the table
    labels = [m for m in map(SYNC_LABEL.match, drawn_labels(run.png)) if m]
    assert {m["rid"] for m in labels} == ids, labels
    for m in labels:
        assert (m["visual"], m["donor"]) == (story[m["rid"]][2], story[m["rid"]][1]), (m[0], story[m["rid"]])
    # TUI: the request table, the event list and the request screens opened from it
    rows, events, opened = _tui_story(run.saved, open_ids)
    assert rows == {rid: (v, d, vis) for rid, (v, d, vis) in story.items()}
    for rid, (verdict, donor, visual) in story.items():
        line = next(line for line in events.splitlines() if re.search(rf"\b{re.escape(rid)}\s+stitch\b", line))
        assert f"visual@{visual} " in line and (f"rows of {donor}" if donor else "its own rows") in line, line
    for rid, (view, detail, strip) in opened.items():
        verdict, donor, visual = story[rid]
        assert view.doc.outcome is not None and view.doc.outcome.id == rid
        assert (view.doc.outcome.verdict, view.doc.outcome.donor, view.doc.outcome.visual_offset) == \
            (verdict, donor, None if visual == "–" else int(visual))
        shown = {k: v for k, *rest in (line.split() for line in detail.splitlines() if line.strip()) for v in rest[:1]}
        assert shown.get("visual_offset") == visual, detail  # the CLI table's visual@, from the same field
        assert shown.get("donor") == (donor or "its"), detail
        if donor:
            assert f"rows of {donor}" in detail, detail
        # the offsets panel's legend: the same visual offset (when the rows sit somewhere as a block) and donor
        legend = strip.splitlines()[-1]
        assert (f"visual@{visual}" in legend) == (visual != "–") and ((f"rows of {donor}" in legend) == bool(donor)), legend


def test_injected_replay_tells_one_story(injected):
    story = _story(injected.data)
    assert story["req-06"] == ("contaminated", "req-08", "3")  # the case, measured
    assert story["req-01"][0] == "desync" and story["req-01"][1] == "req-02"  # a mix: the larger share names the donor
    _check_replay(injected, ["req-06", "req-07", "req-01"])
    labels = [e for e in injected.data["events"] if e.get("origin") == "fault"]
    assert labels and all(e["kind"] in ("buffer_write", "buffer_overwrite", "shape_mismatch") for e in labels)


def test_clean_replay_tells_one_story(clean):
    story = _story(clean.data)
    assert all(verdict == "ok" and donor is None for verdict, donor, _ in story.values()), story
    _check_replay(clean, ["req-06"])
    assert "fault labels" not in clean.text


def test_injected_replay_observed_donor_is_the_measured_one_when_answers_are_alike(injected):
    """req-08 and req-09 answer alike; production's answer cannot tell them apart, the rows can."""
    for r in injected.data["requests"]:
        if r["observed_verdict"] == "contaminated" and r["donor"]:
            refs = {x["id"]: x["reference"] for x in injected.data["requests"]}
            if refs.get(r["donor"]) == r["observed"]:
                assert r["observed_donor"] == r["donor"], r


def test_runtime_log_tells_one_story(tmp_path, monkeypatch):
    """A runtime log: its table, its timeline PNG and the TUI's request table name the same donors."""
    out, png = tmp_path / "r.json", tmp_path / "t.png"
    text = _invoke("replay", str(SAMPLE / "burst.log"), "--json", str(out), "--timeline-png", str(png))
    data = json.loads(out.read_text())
    story = {r["id"]: (r["verdict"], r["donor"] or None) for r in data["requests"]}
    assert story["42"] == ("contaminated", "43") and story["45"] == ("contaminated", "46")
    table = _table_rows(text, set(story))
    assert {rid: (c["verdict"], c["donor"] or None) for rid, c in table.items()} == story
    # the Rich timeline has a row for every request; those with a sync there each have their sync label in the PNG
    timeline = _timeline_rows(text, set(story))
    assert set(timeline) == set(story), text
    offsets = {r["id"]: (r["visual_offset"], r["text_offset"]) for r in data["requests"]}
    synced = {rid: m["visual"] for rid, cell in timeline.items() if (m := RICH_SYNC.search(cell))}
    assert synced and all(visual == str(offsets[rid][0]) for rid, visual in synced.items()), (synced, offsets)
    labels = {m["rid"]: m for m in map(SYNC_LABEL.match, drawn_labels(png)) if m}
    assert set(labels) == set(synced), (sorted(labels), sorted(synced), drawn_labels(png))
    for rid, m in labels.items():
        assert (m["donor"] or None) == story[rid][1], m[0]
        visual, text_at = offsets[rid]
        assert (m["visual"], m["text"]) == (str(visual), None if text_at is None else str(text_at)), (m[0], offsets[rid])
    for f in data["findings"]:
        if f["kind"] == "contamination":
            assert story[f["request_id"]] == ("contaminated", f["donor"]), f
    # the TUI on the same log (its report built as the CLI builds it)
    from qdebug.commands.log_replay import make_filter, run_log_replay
    from qdebug.tui.app import build_app
    from qdebug.tui.widgets.request_table import RequestTable

    monkeypatch.setenv("QDEBUG_CACHE_DIR", str(tmp_path / "cache"))
    report = run_log_replay([SAMPLE / "burst.log"], make_filter(None, None, None, None))

    async def drive() -> dict:
        tui = build_app(report=report)
        async with tui.run_test(size=(160, 45)) as pilot:
            await pilot.pause()
            table = tui.screen.query_one(RequestTable)
            rows = {}
            for key in table.rows:
                cells = [str(c) for c in table.get_row(key)]
                rows[cells[0]] = (cells[1], None if cells[2] == "–" else cells[2])
            await pilot.press("q")
            return rows

    assert asyncio.run(drive()) == story


def test_attn_tells_one_story(tmp_path):
    """attn on a sample image: the JSON's offsets and steps, the terminal's sync row, the TUI's sync stage and the
    PNG's panel titles agree."""
    out, png, saved = tmp_path / "a.json", tmp_path / "a.png", tmp_path / "a.qdt"
    text = _invoke("attn", str(IMAGE), PROMPT, "--device", "cpu", "--max-new-tokens", "3", "--json", str(out), "--png", str(png),
                   "--save", str(saved))
    data = json.loads(out.read_text())
    image = data["images"][0]
    offsets = f"text@{image['text_offset']} visual@{image['visual_offset']}"
    sync_row = next(line for line in text.splitlines() if line.strip("│ ").startswith("sync"))
    assert offsets in sync_row, sync_row
    assert all(s["ok"] for s in data["stages"]) and not data["findings"]
    titles = " ".join(s for s, _ in read_text_boxes(png)[1])
    for step in data["steps"]:
        assert f"step {step['index']}: {step['token']!r}" in titles, titles
    # the TUI on the saved trace of the same run
    from qdebug.trace.schema import load_trace
    from qdebug.tui.app import build_app
    from qdebug.tui.widgets.stage_detail import StageDetail
    from qdebug.vocab import StageName

    trace = load_trace(saved)

    async def drive() -> tuple[object, str]:
        tui = build_app(trace=trace, source=str(saved))
        async with tui.run_test(size=(160, 50)) as pilot:
            await pilot.pause()
            screen = tui.screen
            screen.select_stage(StageName.SYNC)
            await pilot.pause()
            view, detail = screen.view(), screen.query_one(StageDetail).text
            await pilot.press("q")
            return view, detail

    view, detail = asyncio.run(drive())
    assert view.doc.trace.generated_text == data["generated_text"]
    rows = {line.split()[0]: line.split()[1:] for line in detail.splitlines() if line.strip()}
    assert rows["text_offset"][0] == str(image["text_offset"]) and rows["visual_offset"][0] == str(image["visual_offset"]), detail


def test_diff_tells_one_story(tmp_path):
    """diff of two runs that part (layer 2's kernel gets head-first q/k/v): the JSON, the terminal and the PNG name
    the same first diverging stage. (The TUI has no diff view: `qdebug repl` opens traces and replay reports.)"""
    out, png = tmp_path / "d.json", tmp_path / "d.png"
    text = _invoke("diff", str(IMAGE), PROMPT, "--inject", "head-first:2", "--device", "cpu", "--max-new-tokens", "3",
                   "--json", str(out), "--png", str(png))
    data = json.loads(out.read_text())
    first = data["first_divergence"]["stage"]
    assert first == "layer.2"
    header = next(line for line in text.splitlines() if "first divergence:" in line)
    assert first in header, header
    diverged = [s["name"] for s in data["stages"] if s.get("verdict") not in (None, "same", "ok", "within tolerance")]
    assert diverged and diverged[0] == first, data["stages"]
    texts = " ".join(s for s, _ in read_text_boxes(png)[1])
    assert first in texts, texts


@pytest.mark.vllm
def test_endpoint_report_saved_and_reopened_tells_one_story(traced_server, tmp_path):
    """`replay --endpoint --engine-traces --model --save r.qdr` against a real vLLM with qdebug's plugin: the .qdr carries
    the traces it judged from, and opened in the TUI its table, matrix and request screens say what the CLI said (verdict
    @stage, donor, the answers matrix's title), each request three ways (engine in the burst, engine alone, local model)."""
    from qdebug.analysis.matrix_words import ANSWERS
    from qdebug.replay.report import load_report
    from qdebug.tui.app import build_app
    from qdebug.tui.screens.batch import BatchScreen
    from qdebug.tui.screens.request import RequestScreen
    from qdebug.tui.widgets.contamination_view import ContaminationView
    from qdebug.tui.widgets.request_table import RequestTable
    from qdebug.tui.widgets.stage_list import StageList
    from tests.endpoint.conftest import run_qdebug, small_capture
    from tests.tui.conftest import text_of, wait_for

    capture = small_capture(tmp_path, 3)
    out, saved = tmp_path / "r.json", tmp_path / "r.qdr"
    result = run_qdebug("replay", str(capture), "--endpoint", traced_server.url, "--engine-traces", str(traced_server.traces),
                        "--model", "demo", "--device", "cpu", "--json", str(out), "--save", str(saved), env=WIDE, timeout=900)
    assert result.returncode in (0, 1) and saved.exists(), result.stdout + result.stderr
    data = json.loads(out.read_text())
    ids = {r["id"] for r in data["requests"]}
    cli = _table_rows(result.stdout, ids)
    flat = _flat(result.stdout)
    assert ANSWERS in flat and "request \\ answer of" in flat
    notes = [f for f in data["findings"] if f["kind"] == "detokenization"]  # vLLM's leading space: one line, counted
    if len(notes) > 1:
        assert f"[info] detokenization ×{len(notes)}:" in flat and flat.count("[info] detokenization") == 1, flat
    report = load_report(saved)
    assert set(report.traces) == set(report.engine_alone) == set(report.references) == ids, (list(report.traces), list(report.engine_alone))
    burst = report.extra["engine_traces"]["judged_bursts"]

    async def drive() -> dict:
        tui = build_app(report=report, source=str(saved))
        seen = {}
        async with tui.run_test(size=(260, 50)) as pilot:
            await pilot.pause()
            assert isinstance(tui.screen, BatchScreen)
            table = tui.screen.query_one(RequestTable)
            matrix = _flat(text_of(tui.screen.query_one(ContaminationView), width=200))
            assert ANSWERS in matrix and "request \\ answer of" in matrix and "encoder rows" not in matrix, matrix
            for r in data["requests"]:
                row = [str(c) for c in table.get_row(r["id"])]
                verdict = f"{r['verdict']} @{r['stage']}" if r["stage"] else r["verdict"]
                assert row[1] == verdict == cli[r["id"]]["verdict"], (row, cli[r["id"]])  # `verdict @stage` in both
                assert (row[2] if row[2] != "–" else "") == cli[r["id"]]["donor"], (row, cli[r["id"]])
            for rid in sorted(ids):
                keys = [str(k.value) for k in table.rows]
                table.move_cursor(row=keys.index(rid))
                await pilot.pause()
                await pilot.press("enter")
                await wait_for(pilot, lambda: _stages_shown(tui.screen, RequestScreen, StageList), what=f"{rid}'s request screen")
                screen = tui.screen
                roles = [d.role for d in screen.documents.docs]
                stages = [s.name for s in screen.query_one(StageList).rows]
                seen[rid] = (roles, stages, screen.doc.trace)
                await pilot.press("t")
                assert screen.doc.role == "engine alone" and screen.doc.trace is report.engine_alone[rid]
                await pilot.press("escape")
                await wait_for(pilot, lambda: isinstance(tui.screen, BatchScreen), what="the batch screen")
                table = tui.screen.query_one(RequestTable)
            await pilot.press("q")
        return seen

    seen = asyncio.run(drive())
    for rid, (roles, stages, trace) in seen.items():
        assert roles == [f"engine, burst {burst[rid]}", "engine alone", "local model (reference)"], roles
        assert trace is report.traces[rid] and stages == trace.stage_names and {"preprocess", "encode", "sync"} <= set(stages)


def test_watch_folder_opened_live_opens_each_recording_checks_trace(tmp_path):
    """A watch folder written by the plugin's own writers, a finding of each check that records (with its trace where the
    flight recorder writes it, traces/NAME.qdt): `watch --once` and the live view name the same trace for each, and
    Enter on each opens that trace's stages on a request screen."""
    import shutil

    from textual.widgets import DataTable

    from qdebug.commands.watch import WatchArgs
    from qdebug.engine.watch_log import FindingsLog, WatchFinding
    from qdebug.engine.watch_metrics import WatchCounters
    from qdebug.engine.watch_traces import AFTER_DECODER, BEFORE_DECODER
    from qdebug.tui.screens.request import RequestScreen
    from qdebug.tui.watch_app import build_watch_app
    from qdebug.tui.widgets.stage_list import StageList
    from tests.tui.conftest import TRACE, wait_for

    folder = tmp_path / "watch"
    (folder / "traces").mkdir(parents=True)
    counters = WatchCounters(str(folder), "run1")
    log = FindingsLog(str(folder), 1 << 20)
    checks = sorted(BEFORE_DECODER | AFTER_DECODER)
    for check in checks:
        shutil.copy(TRACE, folder / "traces" / f"req-{check}.qdt")
        counters.add(check, seconds=0.001, violations=1)
        log.add(WatchFinding(check, "violation", "sync", f"req-{check}", f"{check} evidence", trace=f"traces/req-{check}.qdt"))
    counters.flush()
    log.drain()
    once = CliRunner().invoke(app, ["watch", str(folder), "--once"], env=WIDE)
    assert once.exit_code == 1, once.output
    said = [line.strip() for line in once.output.splitlines() if line.startswith("    ")]
    assert said == [f"traces/req-{c}.qdt" for c in checks], once.output

    async def drive() -> dict:
        tui = build_watch_app(WatchArgs(source=str(folder)), interval=60)
        opened = {}
        async with tui.run_test(size=(200, 50)) as pilot:
            found = tui.screen.query_one("#watch-findings", DataTable)
            await wait_for(pilot, lambda: found.row_count == len(checks), what="the first reading")
            rows = [[str(c) for c in found.get_row_at(i)] for i in range(found.row_count)]
            for i, row in enumerate(rows):
                assert row[6] == f"traces/req-{row[1]}.qdt", row  # the CLI's words for the same finding
                found.move_cursor(row=i)
                await pilot.pause()
                await pilot.press("enter")
                await wait_for(pilot, lambda: _stages_shown(tui.screen, RequestScreen, StageList), what=f"the trace of {row}")
                opened[row[1]] = (tui.screen.doc.source, [s.name for s in tui.screen.query_one(StageList).rows])
                await pilot.press("escape")
                await wait_for(pilot, lambda: not isinstance(tui.screen, RequestScreen), what="the watch view")
                found = tui.screen.query_one("#watch-findings", DataTable)
        return opened

    opened = asyncio.run(drive())
    assert set(opened) == set(checks)
    for check, (source, stages) in opened.items():
        assert source == str(folder / "traces" / f"req-{check}.qdt") and {"preprocess", "encode", "sync"} <= set(stages), (check, source)


def _stages_shown(screen, request_screen: type, stage_list: type) -> bool:
    """Whether `screen` is a request screen whose stage list is filled."""
    return isinstance(screen, request_screen) and bool(screen.query(stage_list)) and bool(screen.query_one(stage_list).rows)
