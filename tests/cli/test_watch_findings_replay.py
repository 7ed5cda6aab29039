"""`qdebug replay FINDINGS_LOG`: the watch's findings log (written by its own writer) shown, exit 1 on violations, and
indexed per host into Parquet that DuckDB reads as one table."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
from typer.testing import CliRunner

from qdebug.cli import app
from qdebug.engine.watch_log import FindingsLog, WatchFinding

from .installed import qdebug


def _log(folder: Path, host: str, findings: list[WatchFinding]) -> Path:
    """A findings log written through the watch's own writer (its thread, its rotation, its line format)."""
    folder.mkdir(parents=True, exist_ok=True)
    writer = FindingsLog(str(folder), 1 << 20)
    writer.host = host
    for f in findings:
        writer.add(f)
    writer.drain()
    return folder / "findings.log"


def _violations() -> list[WatchFinding]:
    return [WatchFinding("placement", "violation", "sync", "chatcmpl-a b", "item 0 (image): 24 of 24 rows are chatcmpl-d1's",
                         donors=["chatcmpl-d1"], cobatched=["chatcmpl-d1", "chatcmpl-x,2"], trace="traces/chatcmpl-a.qdt"),
            WatchFinding("encoder_batch", "violation", "encode", "chatcmpl-e", "item 0 alone differs by 0.5",
                         cobatched=["chatcmpl-f", "chatcmpl-g"]),
            WatchFinding("logits", "error", "logits", "chatcmpl-h", "RuntimeError: planted")]


def test_replay_shows_the_violations_and_exits_1(tmp_path):
    log = _log(tmp_path / "w", "gpu-3", _violations())
    result = CliRunner().invoke(app, ["replay", str(log), "--json", str(tmp_path / "f.json")])
    assert result.exit_code == 1, result.output
    for text in ("chatcmpl-a b", "chatcmpl-d1", "chatcmpl-x,2", "encoder_batch", "encode", "chatcmpl-f", "gpu-3", "2 violation(s), 1 failed"):
        assert text in result.output, text
    data = json.loads((tmp_path / "f.json").read_text())
    assert data["violations"] == 2
    first = data["findings"][0]
    assert (first["request_id"], first["check"], first["stage"], first["donors"]) == ("chatcmpl-a b", "placement", "sync", ["chatcmpl-d1"])
    assert first["cobatched"] == ["chatcmpl-d1", "chatcmpl-x,2"]


def test_a_log_without_violations_exits_0_and_a_bad_line_exits_2(tmp_path):
    log = _log(tmp_path / "w", "gpu-1", [_violations()[2]])
    code, out, err = qdebug(tmp_path, "replay", log)
    assert code == 0 and "chatcmpl-h" in out and "0 violation(s)" in out, (out, err)
    with open(log, "a") as fh:
        fh.write("not a findings line\n")
    code, out, err = qdebug(tmp_path, "replay", log)
    assert code == 2 and "findings.log:2: not a qdebug watch findings line" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_hosts_indexes_read_as_one_duckdb_table(tmp_path):
    a = _log(tmp_path / "a", "gpu-a", _violations())
    b = _log(tmp_path / "b", "ignored", _violations()[:1])
    for log, host in ((a, "gpu-a"), (b, "gpu-b")):
        code, out, err = qdebug(tmp_path, "replay", "--index-only", log, "--out", tmp_path / "index" / host, "--host", host)
        assert code == 0, err
    rows = duckdb.sql(f"SELECT host, request_id, \"check\", stage, donors, cobatched FROM read_parquet('{tmp_path}/index/*/findings.parquet') "
                      "WHERE outcome = 'violation' ORDER BY host, request_id").fetchall()
    assert rows == [("gpu-a", "chatcmpl-a b", "placement", "sync", ["chatcmpl-d1"], ["chatcmpl-d1", "chatcmpl-x,2"]),
                    ("gpu-a", "chatcmpl-e", "encoder_batch", "encode", [], ["chatcmpl-f", "chatcmpl-g"]),
                    ("gpu-b", "chatcmpl-a b", "placement", "sync", ["chatcmpl-d1"], ["chatcmpl-d1", "chatcmpl-x,2"])]
