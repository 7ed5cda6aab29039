"""Item 2: a run that fails to write one output leaves every earlier file at its paths untouched."""

from __future__ import annotations

import os

import pytest

from qdebug.atomic import atomic_path
from qdebug.errors import OutputError
from qdebug.outputs import OutputPlan

from .conftest import one_line_error, qdebug


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_failed_json_keeps_the_earlier_png_and_trace(tmp_path, red_png):
    keep, trace = tmp_path / "keep.png", tmp_path / "keep.qdt"
    keep.write_bytes(b"earlier png")
    trace.write_bytes(b"earlier trace")
    proc = qdebug("attn", red_png, "Describe.", "--device", "cpu", "--max-new-tokens", "2",
                  "--png", keep, "--save", trace, "--json", "/dev/full")
    one_line_error(proc, "/dev/full")
    assert keep.read_bytes() == b"earlier png" and trace.read_bytes() == b"earlier trace"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.png", "keep.qdt"]  # no temporaries left


def test_plan_commits_all_or_none(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("old a")
    with pytest.raises(RuntimeError), OutputPlan({"--a": a, "--b": b}).check():
        with atomic_path(a) as tmp:
            tmp.write_text("new a")
        assert a.read_text() == "old a"  # not renamed before the whole run has succeeded
        raise RuntimeError("the second output failed")
    assert a.read_text() == "old a" and not b.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]
    with OutputPlan({"--a": a, "--b": b}).check():
        for path, text in ((a, "new a"), (b, "new b")):
            with atomic_path(path) as tmp:
                tmp.write_text(text)
    assert a.read_text() == "new a" and b.read_text() == "new b"


def test_two_options_may_not_name_one_file(tmp_path):
    with pytest.raises(OutputError, match="also given to --png"):
        OutputPlan({"--png": tmp_path / "x", "--json": tmp_path / "x"}).check()
