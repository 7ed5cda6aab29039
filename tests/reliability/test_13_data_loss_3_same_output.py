"""Issue 21 item 3: two outputs that name one file (through `..`, a symlink or a hard link) are refused up front."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from qdebug.errors import OutputError
from qdebug.outputs import OutputPlan

from .conftest import one_line_error, qdebug

REPO = Path(__file__).resolve().parents[2]
BURST = REPO / "sample_data" / "burst.log"




@pytest.mark.parametrize("make_sub", [False, True], ids=["no-sub", "sub-exists"])
def test_json_and_jsonl_through_dotdot_are_refused_before_any_work(tmp_path, make_sub):
    if make_sub:
        (tmp_path / "sub").mkdir()
    proc = qdebug("replay", BURST, "--json", "same.json", "--jsonl", "sub/../same.json", cwd=tmp_path)
    line = one_line_error(proc, "--jsonl", "--json", "same.json")
    assert proc.returncode == 2, line
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache") == (["sub"] if make_sub else [])  # nothing written
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())  # not even the log index


def test_symlinked_folder_and_hard_link_name_the_same_file(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    with pytest.raises(OutputError, match="also given to --json"):
        OutputPlan({"--json": tmp_path / "real" / "r.json", "--jsonl": tmp_path / "alias" / "r.json"}).check()
    (tmp_path / "a.json").write_text("old")
    os.link(tmp_path / "a.json", tmp_path / "b.json")
    with pytest.raises(OutputError, match="also given to --json"):
        OutputPlan({"--json": tmp_path / "a.json", "--jsonl": tmp_path / "b.json"}).check()
    OutputPlan({"--json": tmp_path / "a.json", "--jsonl": tmp_path / "c.json", "--png": "/dev/null", "--save": "/dev/null"}).check()


def test_distinct_outputs_are_both_written(tmp_path):
    proc = qdebug("replay", BURST, "--json", "r.json", "--jsonl", "sub/../e.jsonl", cwd=tmp_path)
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr
    assert (tmp_path / "r.json").stat().st_size > 0 and (tmp_path / "e.jsonl").stat().st_size > 0
