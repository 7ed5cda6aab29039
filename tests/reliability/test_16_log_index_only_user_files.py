"""Issue 35 items 2 and 15, and its "Must hold" walk for `replay --index-only`: no file of the user's in --out is ever
removed or rewritten (an index is recognised by its own manifest, and only the files it lists are replaced), the
folder's mode is never changed, and `--out .` works, leaving nothing behind."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

from .conftest import one_line_error, qdebug

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "burst.log"


def _snapshot(folder: Path) -> dict:
    """Every entry under folder: its mode, and for files the sha256 of their bytes (the folder itself included)."""
    out = {".": stat.S_IMODE(os.lstat(folder).st_mode)}
    for p in sorted(folder.rglob("*")):
        st = os.lstat(p)
        digest = hashlib.sha256(p.read_bytes()).hexdigest() if stat.S_ISREG(st.st_mode) else None
        out[str(p.relative_to(folder))] = (stat.S_IMODE(st.st_mode), digest)
    return out


def _user_folder(path: Path) -> Path:
    """A folder of a user's own files under the names a qdebug index uses (and another tool's manifest.json)."""
    path.mkdir()
    (path / "events-0.parquet").write_bytes(b"PAR1 the user's own events")
    (path / "events-00000.parquet").write_bytes(b"PAR1 another tool's partition")
    (path / "requests.parquet").write_bytes(b"PAR1 the user's requests")
    (path / "findings.parquet").write_bytes(b"PAR1 the user's findings")
    (path / "manifest.json").write_text(json.dumps({"tool": "someone-else", "files": ["events-0.parquet"]}))
    (path / "notes.txt").write_text("mine")
    os.chmod(path / "notes.txt", 0o640)
    os.chmod(path, 0o755)
    return path


def test_index_only_never_touches_a_folder_of_user_files_with_qdebug_like_names(tmp_path):
    out = _user_folder(tmp_path / "out")
    before = _snapshot(out)
    proc = qdebug("replay", "--index-only", SAMPLE, "--out", out, cwd=tmp_path)
    one_line_error(proc, "--out", "is not a log index", "manifest.json")
    assert proc.returncode == 2
    assert _snapshot(out) == before  # every byte and every mode, the folder's 755 too
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache") == ["out"]  # no build left beside it


def test_a_user_file_beside_an_index_under_a_name_the_new_index_needs_is_refused(tmp_path):
    out = tmp_path / "idx"
    assert qdebug("replay", "--index-only", SAMPLE, "--out", out).returncode == 0
    (out / "events-00001.parquet").write_bytes(b"the user's")  # not listed by the index's manifest: the user's file
    before = _snapshot(out)
    second = tmp_path / "b.log"
    second.write_bytes(SAMPLE.read_bytes())
    proc = qdebug("replay", "--index-only", SAMPLE, second, "--out", out)  # two logs: two partitions wanted
    one_line_error(proc, "--out", "events-00001.parquet", "not listed by its index's manifest")
    assert proc.returncode == 2
    assert _snapshot(out) == before


def test_index_only_replaces_only_the_files_its_manifest_lists(tmp_path):
    out = tmp_path / "idx"
    second = tmp_path / "b.log"
    second.write_bytes(SAMPLE.read_bytes())
    assert qdebug("replay", "--index-only", SAMPLE, second, "--out", out, "--host", "h").returncode == 0
    assert {p.name for p in out.iterdir()} == {"manifest.json", "events-00000.parquet", "events-00001.parquet",
                                              "requests.parquet", "findings.parquet"}
    (out / "notes.txt").write_text("mine")
    (out / "events-7.parquet").write_bytes(b"the user's, under a name no index of ours uses")
    os.chmod(out, 0o750)
    proc = qdebug("replay", "--index-only", SAMPLE, "--out", out, "--host", "h")  # one log now: one partition
    assert proc.returncode == 0, proc.stderr
    names = {p.name for p in out.iterdir()}
    # the old index's second partition (listed by its manifest) is gone; the user's files stay as they were
    assert names == {"manifest.json", "events-00000.parquet", "requests.parquet", "findings.parquet", "notes.txt", "events-7.parquet"}
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "events-7.parquet").read_bytes() == b"the user's, under a name no index of ours uses"
    assert stat.S_IMODE(os.lstat(out).st_mode) == 0o750
    data = json.loads(qdebug("replay", out, "--json", "-").stdout)
    assert len(data["requests"]) == 8  # burst.log's requests, read from the new index


def test_a_new_out_folder_gets_the_users_usual_mode(tmp_path):
    out = tmp_path / "new" / "idx"
    proc = qdebug("replay", "--index-only", SAMPLE, "--out", out)
    assert proc.returncode == 0, proc.stderr
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(os.lstat(out).st_mode) == 0o777 & ~umask  # as mkdir makes it: never 700
    assert sorted(p.name for p in out.iterdir()) == ["events-00000.parquet", "findings.parquet", "manifest.json", "requests.parquet"]


def test_out_dot_writes_the_index_in_the_working_folder_and_leaves_nothing_else(tmp_path):
    here = tmp_path / "here"
    here.mkdir()
    os.chmod(here, 0o755)
    for _ in range(2):  # a first index, then one replacing it
        proc = qdebug("replay", "--index-only", SAMPLE, "--out", ".", cwd=here)
        assert proc.returncode == 0, proc.stderr
        assert "Traceback" not in proc.stderr
        assert sorted(p.name for p in here.iterdir()) == ["events-00000.parquet", "findings.parquet", "manifest.json",
                                                          "requests.parquet"]
        assert stat.S_IMODE(os.lstat(here).st_mode) == 0o755
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache") == ["here"]  # no temp folder beside it
    assert json.loads(qdebug("replay", here, "--json", "-").stdout)["requests"]


def test_out_naming_a_file_is_one_line_and_the_file_is_kept(tmp_path):
    out = tmp_path / "report.txt"
    out.write_text("mine")
    proc = qdebug("replay", "--index-only", SAMPLE, "--out", out)
    one_line_error(proc, "--out", "not a folder")
    assert out.read_text() == "mine"
