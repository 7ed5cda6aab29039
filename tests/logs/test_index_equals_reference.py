"""At 200 k lines, the Parquet index (column-wise scan, verdicts in SQL) equals, table by table, the reference: the
line-by-line scanner and the per-event Python aggregation the SQLite index used (random chunk sizes, so lines straddle
chunk ends everywhere). benchmarks/log_parse.py --check runs the same comparison at 1 M lines."""

from __future__ import annotations

import random

import pytest

from qdebug.analysis.log_index_build import build_index
from qdebug.replay.formats import log_scan
from tests.logs.log_synth import generate_log

from .reference_index import index_tables, reference_tables


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    path = tmp_path_factory.mktemp("log") / "svc.log"
    generate_log(path, 200_000, seed=24)
    return path


@pytest.mark.parametrize("seed", [24, 25])
def test_index_equals_reference_table_by_table(log, tmp_path, monkeypatch, seed, recogniser):
    """With the native pass (its per-chunk partials merged by the SQL) and with the RE2 passes (every event read)."""
    chunk = random.Random(seed).randrange(20_000, 1_500_000)
    monkeypatch.setattr(log_scan, "CHUNK_BYTES", chunk)
    index, _ = build_index([log], tmp_path / "idx")
    got, want = index_tables(index), reference_tables(log)
    assert len(want["events"]) > 60_000 and want["contam"] and want["findings"]
    for table in want:
        assert got[table] == want[table], table
    assert index.meta["total_lines"] == 200_000 and index.meta["events"] == len(want["events"])


def test_pooled_scan_equals_reference(log, tmp_path, monkeypatch):
    """The worker pool (used for big files) gives the same index as one process."""
    monkeypatch.setattr(log_scan, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(log_scan, "CHUNK_BYTES", 1 << 20)
    index, _ = build_index([log], tmp_path / "idx")
    assert index_tables(index) == reference_tables(log)
