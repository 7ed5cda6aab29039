"""Issue 21 item 11: a broken or hostile log-index cache file is a cache miss (rebuilt), never a traceback, and a
folder at the cache path leaves no `.building` file behind."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from qdebug.replay.log_index import INDEX_VERSION, cache_key

from .conftest import qdebug

BURST = Path(__file__).resolve().parents[2] / "sample_data" / "burst.log"
# The tables as an older or hand-made index might have them: no types enforced, no checks.
LOOSE = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE events(seq INTEGER PRIMARY KEY, line INTEGER, t REAL, kind INTEGER, rid TEXT, donor TEXT,
                    offset INTEGER, text_offset INTEGER, tokens INTEGER, message);
CREATE TABLE requests(ord INTEGER PRIMARY KEY, rid TEXT NOT NULL UNIQUE, line INTEGER, rank INTEGER,
                      has_d INTEGER, d_text INTEGER, d_vis INTEGER, has_w INTEGER, w_vis INTEGER,
                      last_stitch INTEGER, donor TEXT, donor_seq INTEGER);
CREATE TABLE overwrites(seq INTEGER PRIMARY KEY, victim TEXT, donor TEXT);
CREATE TABLE contam(seq INTEGER PRIMARY KEY, victim TEXT, donor TEXT);
CREATE TABLE findings(seq INTEGER PRIMARY KEY);
"""
GOOD_META = {"version": INDEX_VERSION, "complete": True, "sources": [], "files": [{"path": "svc.log", "first_line": 1, "lines": 10}], "total_lines": 10, "unknown_lines": 0,
             "events": 1, "bytes_read": 1, "bytes_total": 1, "build_seconds": 0.1}


def _loose(path: Path, meta: dict | None = None, raw_meta: dict | None = None, event=(1, 1, 0.0, 0, "41"), skip=(), ours=False):
    """An index file: the loose tables above (or, `ours`, qdebug's own) holding the given meta and one event."""
    from qdebug.replay.log_index import _SCHEMA

    conn = sqlite3.connect(path)
    conn.executescript(";\n".join(s for s in (_SCHEMA if ours else LOOSE).split(";\n") if not any(f"TABLE {t}(" in s for t in skip)))
    rows = raw_meta or {k: json.dumps(v) for k, v in (meta or GOOD_META).items()}
    conn.executemany("INSERT INTO meta VALUES (?, ?)", list(rows.items()))
    if "events" not in skip:
        conn.execute("INSERT INTO events(seq, line, t, kind, rid) VALUES (?,?,?,?,?)", event)
    conn.commit()
    conn.close()


CASES = {
    "non-JSON meta": lambda p: _loose(p, raw_meta={"version": "{not json", "complete": "true"}, ours=True),
    "missing tables": lambda p: _loose(p, skip=("events", "requests")),
    "kind 999": lambda p: _loose(p, event=(1, 1, 0.0, 999, "41")),
    "text where numbers belong": lambda p: _loose(p, event=(1, "line one", "noon", "stitch", "41")),
    "meta counts as text": lambda p: _loose(p, meta={**GOOD_META, "events": "many", "total_lines": [1]}, ours=True),
    "meta files not a list": lambda p: _loose(p, meta={**GOOD_META, "files": 3}, ours=True),
    "meta complete as text": lambda p: _loose(p, meta={**GOOD_META, "complete": "yes"}, ours=True),
    "not a database": lambda p: p.write_bytes(b"SQLite format 3\0" + b"\xff" * 4000),
}


@pytest.fixture
def log(tmp_path):
    path = tmp_path / "svc.log"
    shutil.copy(BURST, path)
    return path


def _replay(tmp_path, log):
    out = tmp_path / "r.json"
    proc = qdebug("replay", log, "--json", out, cwd=tmp_path, timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 1), proc.stderr  # 1: the sample burst is contaminated
    return json.loads(out.read_text())


@pytest.mark.parametrize("case", CASES)
def test_a_hostile_cached_index_is_rebuilt(tmp_path, log, case):
    cache = Path(os.environ["QDEBUG_CACHE_DIR"])
    cache.mkdir(parents=True, exist_ok=True)
    CASES[case](cache / f"{cache_key([log])}.sqlite")
    doc = _replay(tmp_path, log)
    assert [r["id"] for r in doc["requests"]] == [str(n) for n in range(41, 49)]  # the log's own requests
    assert [p.name for p in cache.iterdir() if p.name.endswith(".building")] == []


def test_a_folder_at_the_cache_path(tmp_path, log):
    cache = Path(os.environ["QDEBUG_CACHE_DIR"])
    folder = cache / f"{cache_key([log])}.sqlite"
    folder.mkdir(parents=True)
    for _ in range(2):
        doc = _replay(tmp_path, log)
        assert [r["id"] for r in doc["requests"]] == [str(n) for n in range(41, 49)]
    assert folder.is_dir() and list(folder.iterdir()) == []  # not ours: left as it was
    assert [p.name for p in cache.iterdir()] == [folder.name]  # no .building file per run


@pytest.mark.parametrize("row", [(1, 1, 0.0, 999, "41"), (1, "line one", 0.0, 0, "41"), (1, 1, "noon", 0, "41")])
def test_the_index_tables_refuse_values_they_cannot_hold(tmp_path, row):
    """With qdebug's own tables (the only ones an index may have), SQLite itself refuses bad kinds and types."""
    from qdebug.replay.log_index import LogIndex

    index = LogIndex.create(tmp_path / "i.sqlite")
    with pytest.raises(sqlite3.IntegrityError):
        index.conn.execute("INSERT INTO events(seq, line, t, kind, rid) VALUES (?,?,?,?,?)", row)
    index.close()
