"""Item 6: a trace or replay report with malformed JSON fields is refused in one line naming the first bad field."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from qdebug.errors import TraceFormatError
from qdebug.replay.report import load_report
from qdebug.trace.schema import load_trace

from .conftest import one_line_error, qdebug

DATA = Path(__file__).resolve().parents[1] / "data"


def rewrite(source: Path, target: Path, member: str, change) -> Path:
    """Copy a zip, passing one JSON member through `change(doc)` (which edits it in place)."""
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(target, "w") as zf:
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename == member:
                doc = json.loads(data)
                change(doc)
                data = json.dumps(doc).encode()
            zf.writestr(info.filename, data)
    return target


@pytest.mark.parametrize("change, field", [
    (lambda d: d["meta"].pop("model"), "meta.model: missing"),
    (lambda d: d["meta"]["model"].pop("architecture"), "meta.model.architecture: missing"),
    (lambda d: d["meta"].update(num_layers="four"), "meta.num_layers: expected an integer, got a string"),
    (lambda d: d.pop("input_ids"), "input_ids: missing"),
    (lambda d: d["images"][0].update(size=[168]), "images[0].size: expected 2 or more items"),
    (lambda d: d["images"][0].update(grid_thw=None), "images[0].grid_thw: expected a list, got null"),
    (lambda d: d["steps"][1]["topk"].update(probs="high"), "steps[1].topk.probs: expected a list, got a string"),
    (lambda d: d["stages"][0]["checks"][0].update(ok="yes"), "stages[0].checks[0].ok: expected true or false"),
    (lambda d: d["findings"].append({"kind": "x", "severity": "warning"}), "findings[0].message: missing"),
    (lambda d: d["images"][0].update(span=[5, 10_000]), "images[0].span: expected [start, end) inside"),
    (lambda d: d.update(tokens=d["tokens"][:-1]), "tokens: expected"),
])
def test_trace_fields_are_named(tmp_path, change, field):
    bad = rewrite(DATA / "red_circle.qdt", tmp_path / "bad.qdt", "trace.json", change)
    with pytest.raises(TraceFormatError) as info:
        load_trace(bad)
    assert field in info.value.message and "bad.qdt" in info.value.message


def test_cli_names_the_missing_field(tmp_path):
    bad = rewrite(DATA / "red_circle.qdt", tmp_path / "bad.qdt", "trace.json", lambda d: d["meta"].pop("model"))
    for args in (("diff", bad, DATA / "red_circle.qdt"), ("repl", "--trace", bad)):
        proc = qdebug(*args)
        one_line_error(proc, "bad.qdt", "meta.model: missing")
        assert proc.returncode == 2


@pytest.mark.parametrize("change, field", [
    (lambda d: d.pop("requests"), "requests: missing"),
    (lambda d: d["requests"][0].update(verdict="fine"), "requests[0].verdict: expected one of"),
    (lambda d: d["requests"][0].update(visual_offset="12"), "requests[0].visual_offset: expected an integer or null"),
    (lambda d: d["contamination"].update(matrix=[[0.0]]), "contamination.matrix: expected"),
    (lambda d: d["events"][0].pop("kind"), "events[0].kind: missing"),
])
def test_report_fields_are_named(tmp_path, change, field):
    bad = rewrite(DATA / "burst.qdr", tmp_path / "bad.qdr", "report.json", change)
    with pytest.raises(TraceFormatError) as info:
        load_report(bad)
    assert field in info.value.message


def test_report_trace_member_is_validated_too(tmp_path):
    inner = rewrite(DATA / "red_circle.qdt", tmp_path / "inner.qdt", "trace.json", lambda d: d["meta"].pop("num_heads"))
    bad = tmp_path / "bad.qdr"
    with zipfile.ZipFile(DATA / "burst.qdr") as src, zipfile.ZipFile(bad, "w") as zf:
        for info in src.infolist():
            data = inner.read_bytes() if info.filename == "traces/replayed/0.qdt" else src.read(info.filename)
            zf.writestr(info.filename, data)
    with pytest.raises(TraceFormatError, match=r"bad\.qdr:traces/replayed/0\.qdt: malformed trace: meta\.num_heads: missing"):
        load_report(bad)


def test_the_first_bad_field_in_document_order_is_named(tmp_path):
    def two_faults(d):
        d["findings"] = "none"  # late in the document
        d["meta"]["num_heads"] = "four"  # early in the document

    bad = rewrite(DATA / "red_circle.qdt", tmp_path / "bad.qdt", "trace.json", two_faults)
    with pytest.raises(TraceFormatError, match=r"malformed trace: meta\.num_heads: expected an integer, got a string$"):
        load_trace(bad)
