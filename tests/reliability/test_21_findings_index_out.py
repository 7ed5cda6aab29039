"""Issue 49 items 3 and 14: `qdebug replay --index-only findings.log --out DIR` checks DIR before it reads a line, as
the runtime-log index does: a user's findings.parquet (or any other file) there is never replaced, a file or an
impossible path as --out is one line; a findings index it wrote itself is replaced by the next run."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from qdebug.cli import app
from qdebug.engine.watch_log import FindingsLog, WatchFinding

from .conftest import one_line_error, qdebug


def _log(folder, request_ids: list[str]):
    """A findings log written by the plugin's own writer."""
    folder.mkdir(parents=True, exist_ok=True)
    writer = FindingsLog(str(folder), 1 << 20)
    for rid in request_ids:
        writer.add(WatchFinding("placement", "violation", "sync", rid, "24 of 24 rows"))
    writer.drain()
    return folder / "findings.log"


def _snapshot(folder):
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def test_a_users_findings_parquet_is_never_replaced(tmp_path):
    log = _log(tmp_path / "w", ["chatcmpl-a"])
    out = tmp_path / "mine"
    out.mkdir()
    pq.write_table(pa.table({"q3_revenue": [1.5, 2.5]}), out / "findings.parquet")  # the user's own table
    before = _snapshot(out)
    one_line_error(qdebug("replay", "--index-only", log, "--out", out), "--out", "findings.parquet in it is not one qdebug wrote")
    assert _snapshot(out) == before


def test_a_log_index_folder_is_not_written_into(tmp_path):
    log = _log(tmp_path / "w", ["chatcmpl-a"])
    out = tmp_path / "logindex"
    out.mkdir()
    (out / "manifest.json").write_text('{"format": "qdebug-log-index", "version": 4, "parts": []}')
    pq.write_table(pa.table({"kind": ["overwrite"]}), out / "findings.parquet")  # the log index's own findings
    before = _snapshot(out)
    one_line_error(qdebug("replay", "--index-only", log, "--out", out), "manifest.json in it is not a findings index")
    assert _snapshot(out) == before


def test_its_own_index_is_replaced_by_the_next_run(tmp_path):
    out = tmp_path / "index" / "gpu-3"
    for ids in (["chatcmpl-a"], ["chatcmpl-a", "chatcmpl-b"]):
        proc = qdebug("replay", "--index-only", _log(tmp_path / f"w{len(ids)}", ids), "--out", out, "--host", "gpu-3")
        assert proc.returncode == 0, proc.stderr
    rows = duckdb.sql(f"SELECT request_id FROM read_parquet('{out}/findings.parquet') ORDER BY 1").fetchall()
    assert rows == [("chatcmpl-a",), ("chatcmpl-b",)] and [p.name for p in out.iterdir()] == ["findings.parquet"]


@pytest.mark.parametrize("where", ["a-file", "/dev/null/x"])
def test_an_out_that_cannot_be_a_folder_is_one_line(tmp_path, where):
    log = _log(tmp_path / "w", ["chatcmpl-a"])
    (tmp_path / "a-file").write_text("mine")
    out = tmp_path / where if where == "a-file" else where
    one_line_error(qdebug("replay", "--index-only", log, "--out", out), f"--out {out}")
    assert (tmp_path / "a-file").read_text() == "mine"


def test_the_same_refusal_through_clirunner(tmp_path):
    log = _log(tmp_path / "w", ["chatcmpl-a"])
    out = tmp_path / "mine"
    out.mkdir()
    (out / "findings.parquet").write_bytes(b"not parquet at all")
    result = CliRunner().invoke(app, ["replay", "--index-only", str(log), "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "findings.parquet in it is not one qdebug wrote" in result.output and "Traceback" not in result.output
    assert (out / "findings.parquet").read_bytes() == b"not parquet at all"
