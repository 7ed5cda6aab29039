"""A generated 2 M-line log with known truth: same findings whole, gzipped, rotated and re-opened from the index."""

from __future__ import annotations

import gzip
import hashlib
import itertools
import json
import shutil

import pytest

from qdebug.analysis.log_index_build import open_log_index
from qdebug.analysis.log_report import iter_cells, iter_findings, outcome_from_row


def _digest(index) -> dict:
    """Everything a report says about the log, reduced to counts and hashes (streamed: nothing held)."""
    h = {name: hashlib.sha256() for name in ("requests", "findings", "cells", "event_rows")}
    for r in index.requests():
        h["requests"].update(json.dumps(outcome_from_row(r).to_json()).encode())
    for f in iter_findings(index):
        h["findings"].update(json.dumps(f.to_json()).encode())
    for c in iter_cells(index):
        h["cells"].update(json.dumps(c).encode())
    for row in index.conn.execute("SELECT * FROM events ORDER BY seq"):
        h["event_rows"].update(repr(row).encode())
    return {"lines": index.meta["total_lines"], "unknown": index.meta["unknown_lines"], "events": index.meta["events"],
            **{k: v.hexdigest() for k, v in h.items()}}


@pytest.fixture(scope="module")
def whole(big_log, tmp_path_factory, monkeypatch_module):
    path, truth = big_log
    monkeypatch_module.setenv("QDEBUG_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    index, reused, interrupted = open_log_index([path])
    assert not reused and not interrupted
    return index, _digest(index)


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_whole_log_matches_the_truth(big_log, whole):
    _, truth = big_log
    index, digest = whole
    assert digest["lines"] == truth.lines == 2_000_000
    assert digest["unknown"] == truth.unknown and digest["events"] == truth.events
    assert index.request_count() == truth.requests
    assert {v: d for v, d, _ in index.cells()} == truth.contaminated
    counts = index.finding_counts()
    assert counts["contamination"] == len(truth.contaminated)
    assert counts["desync"] == truth.desync
    assert counts["shape_mismatch"] == truth.shape_mismatch
    assert counts["index_out_of_bounds"] == truth.index_out_of_bounds
    verdicts = index.verdict_counts()
    assert verdicts["contaminated"] == len(truth.contaminated)
    assert truth.late_overwrites > 0  # the log has overwrites after a stitch, and they were not counted


def test_reopened_index_is_reused_and_identical(big_log, whole):
    path, _ = big_log
    index, reused, _ = open_log_index([path])
    assert reused
    assert _digest(index) == whole[1]


def test_gzipped_log_gives_the_same_findings(big_log, whole, tmp_path):
    path, _ = big_log
    gz = tmp_path / "svc.log.gz"
    with open(path, "rb") as src, gzip.open(gz, "wb", compresslevel=1) as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    index, reused, _ = open_log_index([gz], use_cache=False)
    assert not reused
    assert _digest(index) == whole[1]


def test_rotated_files_in_any_order_give_the_same_findings(big_log, whole, tmp_path):
    path, _ = big_log
    parts = [tmp_path / "svc.log.2.gz", tmp_path / "svc.log.1.gz", tmp_path / "svc.log"]
    with open(path, "rb") as src:
        for i, part in enumerate(parts):
            out = gzip.open(part, "wb", compresslevel=1) if part.suffix == ".gz" else open(part, "wb")
            with out:
                out.writelines(itertools.islice(src, 700_000) if i < 2 else src)
    index, _, _ = open_log_index([parts[2], parts[0], parts[1]], use_cache=False)
    assert [f["path"] for f in index.meta["files"]] == [str(p) for p in parts]
    assert [f["lines"] for f in index.meta["files"]] == [700_000, 700_000, 600_000]
    assert _digest(index) == whole[1]


def test_ctrl_c_on_the_installed_command_reports_what_was_read(big_log, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    path, _ = big_log
    cache, out = tmp_path / "cache", tmp_path / "r.json"
    env = {**os.environ, "QDEBUG_CACHE_DIR": str(cache)}
    proc = subprocess.Popen([sys.executable, "-m", "qdebug", "replay", str(path), "--json", str(out)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    # wait until rows reach the index on disk (some lines read), then interrupt mid-read
    while proc.poll() is None and time.monotonic() < deadline and not any(
            p.stat().st_size > 2**20 for p in cache.glob("*.building/events-*.parquet")):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr
    assert "interrupted after" in stderr and "Traceback" not in stderr
    doc = json.loads(out.read_text())
    assert doc["interrupted"] is True and doc["events"]
    assert not list(cache.glob("[!.]*/manifest.json"))  # nothing cached from a partial read
