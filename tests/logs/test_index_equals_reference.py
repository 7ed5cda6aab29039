"""At 1 M lines, the index built with the column-wise scanner equals, table by table, the one the line-by-line
reference scanner builds (random chunk sizes, so lines straddle chunk ends everywhere)."""

from __future__ import annotations

import random

import pytest

from qdebug.analysis.log_index_build import build_index
from qdebug.replay.formats import log_columns, log_scan
from qdebug.replay.formats.log_synth import generate_log

TABLES = ("events", "requests", "overwrites", "contam", "findings")


def _reference_block(buf: bytes, stop: int, line0: int, seq: int, clock):
    """The reference: the chunk's lines split in Python and recognised one by one (log_scan._scan_lines)."""
    lines = buf[1:stop].split(b"\n")[:-1]
    rows, seq, unknown = log_scan._scan_lines(lines, line0, seq, clock)
    return rows, seq, len(lines), unknown


def _tables(index) -> dict[str, list]:
    return {t: index.conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in TABLES}


@pytest.fixture(scope="module")
def million(tmp_path_factory):
    path = tmp_path_factory.mktemp("million") / "svc.log"
    generate_log(path, 1_000_000, seed=24)
    return path


def test_index_equals_reference_table_by_table(million, tmp_path, monkeypatch):
    chunk = random.Random(24).randrange(50_000, 3_000_000)
    monkeypatch.setattr(log_scan, "CHUNK_BYTES", chunk)
    fast, _ = build_index([million], tmp_path / "fast.sqlite")
    monkeypatch.setattr(log_columns, "scan_block_columns", _reference_block)
    slow, _ = build_index([million], tmp_path / "slow.sqlite")
    got, want = _tables(fast), _tables(slow)
    assert len(want["events"]) > 300_000 and want["contam"]
    for table in TABLES:
        assert got[table] == want[table], table
    meta_keys = ("total_lines", "unknown_lines", "events", "files")
    assert {k: fast.meta[k] for k in meta_keys} == {k: slow.meta[k] for k in meta_keys}
