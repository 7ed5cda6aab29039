"""Issue 21 item 11 (Parquet index since issue 24): a broken or hostile log-index cache entry is a cache miss (rebuilt),
never a traceback; a link, file or foreign folder at the cache path is left alone and no `.building` folder is left
behind; an index folder given on the command line that is no index gets a one-line error naming what is wrong."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from qdebug.replay.log_index import INDEX_VERSION, cache_key

from .conftest import one_line_error, qdebug

BURST = Path(__file__).resolve().parents[2] / "sample_data" / "burst.log"
IDS = [str(n) for n in range(41, 49)]


def _manifest(folder: Path, **changes) -> None:
    m = json.loads((folder / "manifest.json").read_text())
    m.update(changes)
    (folder / "manifest.json").write_text(json.dumps(m))


def _events(folder: Path, table: pa.Table) -> None:
    """Replace the events partition with `table`, the manifest's sizes updated (so only the content is wrong)."""
    pq.write_table(table, folder / "events-00000.parquet")
    m = json.loads((folder / "manifest.json").read_text())
    m["sizes"]["events-00000.parquet"] = (folder / "events-00000.parquet").stat().st_size
    (folder / "manifest.json").write_text(json.dumps(m))


def _loose_events(**cols) -> pa.Table:
    base = {"seq": [0], "line": [1], "t": [0.0], "kind": [0], "rid": ["41"], "donor": [None], "offset": [None],
            "text_offset": [None], "tokens": [None], "message": [None]}
    return pa.table({**base, **cols})


CASES = {
    "non-JSON manifest": lambda f: (f / "manifest.json").write_text("{not json"),
    "another version": lambda f: _manifest(f, version=INDEX_VERSION + 1),
    "unfinished": lambda f: _manifest(f, complete=False),
    "complete as text": lambda f: _manifest(f, complete="yes"),
    "meta counts as text": lambda f: _manifest(f, events="many", total_lines=[1]),
    "meta files not a list": lambda f: _manifest(f, files=3),
    "a part outside the folder": lambda f: _manifest(f, parts=[{"file": "../../etc/passwd", "rows": 1, "source": ""}]),
    "missing partition": lambda f: (f / "events-00000.parquet").unlink(),
    "not Parquet": lambda f: _events_bytes(f, b"PAR1" + b"\xff" * 4000),
    "kind 99": lambda f: _events(f, _loose_events(kind=pa.array([99], pa.int8()))),
    "kind as wide int": lambda f: _events(f, _loose_events(kind=[999])),
    "text where numbers belong": lambda f: _events(f, _loose_events(line=["line one"], t=["noon"])),
    "a page that does not decode": lambda f: _scribble(f / "events-00000.parquet"),
    "truncated requests": lambda f: (f / "requests.parquet").write_bytes((f / "requests.parquet").read_bytes()[:100]),
}


def _scribble(path: Path) -> None:
    """Overwrite bytes inside the file's data pages (same size, footer intact: the manifest's checks pass)."""
    data = bytearray(path.read_bytes())
    data[60:400] = b"\x55" * 340
    path.write_bytes(bytes(data))


def _events_bytes(folder: Path, data: bytes) -> None:
    (folder / "events-00000.parquet").write_bytes(data)
    _manifest(folder, sizes={**json.loads((folder / "manifest.json").read_text())["sizes"], "events-00000.parquet": len(data)})


@pytest.fixture
def log(tmp_path):
    path = tmp_path / "svc.log"
    shutil.copy(BURST, path)
    return path


def _replay(tmp_path, *inputs):
    out = tmp_path / "r.json"
    proc = qdebug("replay", *inputs, "--json", out, cwd=tmp_path, timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 1), proc.stderr  # 1: the sample burst is contaminated
    return json.loads(out.read_text())


def _cached(tmp_path, log) -> Path:
    """The log's cache entry, built by a first run."""
    _replay(tmp_path, log)
    entry = Path(os.environ["QDEBUG_CACHE_DIR"]) / cache_key([log])
    assert (entry / "manifest.json").is_file()
    return entry


@pytest.mark.parametrize("case", CASES)
def test_a_hostile_cached_index_is_rebuilt(tmp_path, log, case):
    entry = _cached(tmp_path, log)
    CASES[case](entry)
    doc = _replay(tmp_path, log)
    assert [r["id"] for r in doc["requests"]] == IDS  # the log's own requests
    cache = entry.parent
    assert [p.name for p in cache.iterdir()] == [entry.name]  # rebuilt in place: no .building or .stale left
    assert json.loads((entry / "manifest.json").read_text())["complete"] is True


@pytest.mark.parametrize("what", ["folder", "file", "symlink"])
def test_something_not_ours_at_the_cache_path(tmp_path, log, what):
    cache = Path(os.environ["QDEBUG_CACHE_DIR"])
    cache.mkdir(parents=True)
    at = cache / cache_key([log])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    {"folder": lambda: (at.mkdir(), (at / "notes.txt").write_text("mine")), "file": lambda: at.write_text("mine"),
     "symlink": lambda: at.symlink_to(elsewhere)}[what]()
    for _ in range(2):
        doc = _replay(tmp_path, log)
        assert [r["id"] for r in doc["requests"]] == IDS
    assert [p.name for p in cache.iterdir()] == [at.name]  # no .building folder per run
    assert list(elsewhere.iterdir()) == []  # nothing written through the link
    if what == "folder":
        assert [p.name for p in at.iterdir()] == ["notes.txt"]  # not ours: left as it was


@pytest.mark.parametrize("case", ["non-JSON manifest", "another version", "not Parquet", "kind 99", "a page that does not decode"])
def test_a_bad_index_folder_on_the_command_line_is_one_line(tmp_path, log, case):
    folder = tmp_path / "idx"
    proc = qdebug("replay", "--index-only", log, "--out", folder, "--host", "a", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    CASES[case](folder)
    proc = qdebug("replay", folder, cwd=tmp_path)
    line = one_line_error(proc, str(folder), "expected")
    assert "is not a log index" in line or "cannot be read" in line, line


def test_a_folder_that_is_no_index_is_named(tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    one_line_error(qdebug("replay", folder, cwd=tmp_path), "no manifest.json", "--index-only")


def test_a_cache_that_cannot_be_written_still_reports(tmp_path, log, monkeypatch):
    """No writable cache (read-only, or a file where its folder would be; root ignores chmod): the index is built in
    a private temp folder for this run and removed after."""
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder")
    monkeypatch.setenv("QDEBUG_CACHE_DIR", str(blocker / "cache"))
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    for _ in range(2):
        assert [r["id"] for r in _replay(tmp_path, log)["requests"]] == IDS
    assert blocker.read_text() == "a file, not a folder"
    assert list(temp.iterdir()) == []  # the private build is gone once the run ends


def test_index_only_never_replaces_a_folder_that_is_not_an_index(tmp_path, log):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    one_line_error(qdebug("replay", "--index-only", log, "--out", out, cwd=tmp_path), "--out", "is not a log index")
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".building")] == []
