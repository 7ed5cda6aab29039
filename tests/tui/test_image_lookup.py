"""A request opened from a report finds its image where the capture named it (relative to the capture's folder, or
beside the moved report), and says where it looked when the file is nowhere."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from qdebug.replay.report import load_report
from qdebug.tui.app import build_app
from qdebug.tui.images import image_dirs_for, pil_image
from qdebug.tui.screens.request import RequestScreen
from qdebug.tui.widgets.attention_view import AttentionView

from .conftest import REPORT, ROOT, SIZE, text_of, wait_for

PNG = ROOT / "sample_data" / "red_circle_top_left.png"


def _report_naming(names: dict[str, str], source: str):
    """The hand-made burst, as if replayed from `source` whose lines name the images `names` (id → path)."""
    report = load_report(REPORT)
    report.source = source
    for rid, name in names.items():
        for traces in (report.traces, report.references):
            trace = traces[rid]
            trace.images[0] = dataclasses.replace(trace.images[0], path=name)
    return report


async def _attention_of(app, pilot, row: int) -> tuple[object, str]:
    for _ in range(row):
        await pilot.press("down")
    await pilot.press("enter")
    await wait_for(pilot, lambda: isinstance(app.screen, RequestScreen), what="the request screen")
    await pilot.pause()
    screen = app.screen
    return screen.doc, text_of(screen.query_one(AttentionView))


async def test_images_resolve_relative_to_the_capture_and_beside_the_report(tmp_path, monkeypatch):
    (tmp_path / "caps" / "capture").mkdir(parents=True)
    shutil.copy(PNG, tmp_path / "caps" / "capture" / "req-01.png")
    (tmp_path / "moved").mkdir()
    shutil.copy(PNG, tmp_path / "moved" / "req-02.png")  # a report mailed with its images beside it
    monkeypatch.chdir(tmp_path)
    report = _report_naming({"a": "capture/req-01.png", "b": "capture/req-02.png", "c": "capture/req-03.png"}, "caps/capture.jsonl")
    app = build_app(report=report, source="moved/burst.qdr")
    async with app.run_test(size=SIZE) as pilot:
        doc, attention = await _attention_of(app, pilot, 0)
        assert pil_image(doc, 0) is not None and "not found" not in attention and "not available" not in attention
        await pilot.press("escape")
        doc, attention = await _attention_of(app, pilot, 1)
        assert pil_image(doc, 0) is not None and "not found" not in attention
        await pilot.press("escape")
        doc, attention = await _attention_of(app, pilot, 2)
    assert pil_image(doc, 0) is None
    flat = " ".join(attention.split())
    assert "image 0 not found: capture/req-03.png (looked in" in flat
    for place in ("caps/capture", "moved/caps/capture", "moved"):
        assert place in flat


def test_image_dirs_for_a_trace_file_and_for_no_file():
    assert image_dirs_for("runs/one.qdt") == (Path("runs"),)
    assert image_dirs_for("qdebug attn cat.png") == ()


async def test_a_report_saved_from_one_folder_finds_its_capture_images_when_opened_from_another(tmp_path, monkeypatch):
    from qdebug.replay.report import save_report

    (tmp_path / "work" / "caps" / "capture").mkdir(parents=True)
    shutil.copy(PNG, tmp_path / "work" / "caps" / "capture" / "req-01.png")
    monkeypatch.chdir(tmp_path / "work")  # the replay ran here, with a relative capture path
    saved = save_report(_report_naming({"a": "capture/req-01.png"}, "caps/capture.jsonl"), tmp_path / "burst.qdr")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # ... and the report is opened from another folder
    report = load_report(saved)
    assert report.source == "caps/capture.jsonl" and report.source_dir == str(tmp_path / "work" / "caps")
    assert "source_dir" not in report.to_json()  # the --json document is unchanged
    app = build_app(report=report, source=str(saved))
    async with app.run_test(size=SIZE) as pilot:
        doc, attention = await _attention_of(app, pilot, 0)
    assert pil_image(doc, 0) is not None and "not found" not in attention
