"""Issue 21 item 21: a server's NaN logprob is written as null with a finding; qdebug's JSON always parses strictly."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from qdebug.strict_json import dumps

from .conftest import qdebug
from .hostile import hostile_server, small_capture, strict_json


def test_nan_logprob_from_a_server_is_null_and_a_finding(tmp_path):
    capture = small_capture(tmp_path)
    server = hostile_server(tmp_path, "nan")
    try:
        out = tmp_path / "r.json"
        proc = qdebug("replay", capture, "--endpoint", server.url, "--repeat", "1", "--json", out, "--exit-zero", timeout=120)
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr
    doc = strict_json(out.read_text())
    nan = [f for f in doc["findings"] if f["kind"] == "nan_inf"]
    assert nan and "'a': nan" in nan[0]["message"] and "written as null" in nan[0]["message"], doc["findings"]
    assert all(r["first_token_kl"] is None or math.isfinite(r["first_token_kl"]) for r in doc["requests"])


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_strict_writer_writes_null(value):
    assert strict_json(dumps({"a": [1.0, value, {"b": (value,)}]})) == {"a": [1.0, None, {"b": [None]}]}


def test_a_trace_with_nan_probabilities_saves_as_strict_json_and_reads_back(tmp_path):
    import zipfile

    from qdebug.trace.schema import load_trace, save_trace

    trace = load_trace(Path(__file__).resolve().parents[1] / "data" / "red_circle.qdt")
    trace.steps[0].prob = float("nan")
    trace.steps[0].topk.probs[0] = float("inf")
    save_trace(trace, tmp_path / "t.qdt")
    with zipfile.ZipFile(tmp_path / "t.qdt") as zf:
        doc = strict_json(zf.read("trace.json").decode())
    assert doc["steps"][0]["prob"] is None and doc["steps"][0]["topk"]["probs"][0] is None
    back = load_trace(tmp_path / "t.qdt")
    assert math.isnan(back.steps[0].prob) and math.isnan(back.steps[0].topk.probs[0])
