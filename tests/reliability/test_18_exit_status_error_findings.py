"""Item 11: an ERROR finding is exit 1, whichever command reports it (`qdebug diff` of a trace whose steps were emptied
reported `[error] generation_diverged` and exited 0, since its texts and stages agreed)."""

from __future__ import annotations

import json
import zipfile

import pytest

from .conftest import qdebug


@pytest.fixture(scope="module")
def saved(demo_trace, tmp_path_factory):
    """A demo trace saved to a.qdt, and b.qdt: the same file with its generation steps removed from trace.json."""
    from qdebug.trace.schema import save_trace

    root = tmp_path_factory.mktemp("traces")
    a = save_trace(demo_trace[0], root / "a.qdt")
    with zipfile.ZipFile(a) as src, zipfile.ZipFile(root / "b.qdt", "w") as out:
        doc = json.loads(src.read("trace.json"))
        assert doc["steps"] and doc["generated_text"]
        doc["steps"] = []
        for name in src.namelist():
            out.writestr(name, json.dumps(doc) if name == "trace.json" else src.read(name))
    return a, root / "b.qdt"


def test_diff_with_an_error_finding_exits_1(saved, tmp_path):
    a, b = saved
    proc = qdebug("diff", a, b, "--json", tmp_path / "d.json")
    assert "Traceback" not in proc.stderr, proc.stderr
    doc = json.loads((tmp_path / "d.json").read_text())
    errors = [f for f in doc["findings"] if f["severity"] == "error"]
    assert [f["kind"] for f in errors] == ["generation_diverged"], doc["findings"]
    assert doc["first_divergence"] is None  # what `parted` alone looked at: no stage beyond tolerance, same texts
    assert proc.returncode == 1, proc.stdout + proc.stderr


def test_diff_of_a_trace_with_itself_still_exits_0(saved, tmp_path):
    a, _ = saved
    proc = qdebug("diff", a, a, "--json", tmp_path / "d.json")
    doc = json.loads((tmp_path / "d.json").read_text())
    assert not [f for f in doc["findings"] if f["severity"] == "error"], doc["findings"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
