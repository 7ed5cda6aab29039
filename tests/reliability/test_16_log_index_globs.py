"""Issue 35 item 4: an index folder's name is never a DuckDB glob pattern. `replay 'idx[1]'` reads idx[1]'s files
(not idx1's), `replay 'idx*'` reads that folder alone (not its siblings), and --index-only builds into such a folder."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import one_line_error, qdebug

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "burst.log"


def _ids(folder: Path, cwd: Path) -> list[str]:
    proc = qdebug("replay", folder.name, "--json", "-", cwd=cwd)
    assert proc.returncode in (0, 1), proc.stderr  # 1: burst.log's contaminated requests
    return [r["id"] for r in json.loads(proc.stdout)["requests"]]


def _log(path: Path, prefix: str) -> Path:
    """burst.log with its request ids prefixed: each folder's index names its own requests."""
    path.write_bytes(SAMPLE.read_bytes().replace(b"request_id=", b"request_id=" + prefix.encode())
                     .replace(b"(previously ", b"(previously " + prefix.encode()))
    return path


def test_folder_names_with_glob_characters_read_their_own_files(tmp_path):
    folders = {"idx[1]": "bracket", "idx1": "plain", "idx*": "star", "idxA": "sibling", "q?": "question", "qq": "qq"}
    for name, prefix in folders.items():
        proc = qdebug("replay", "--index-only", _log(tmp_path / f"{prefix}.log", prefix), "--out", name, "--host", prefix,
                      cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "Traceback" not in proc.stderr
    for name, prefix in folders.items():
        ids = _ids(tmp_path / name, tmp_path)
        assert len(ids) == 8 and all(i.startswith(prefix) for i in ids), (name, ids)
    # several folders read as one: each read once, by its own name
    proc = qdebug("replay", "idx[1]", "idx*", "--json", "-", cwd=tmp_path)
    hosts = {r["id"].split("/")[0] for r in json.loads(proc.stdout)["requests"]}
    assert hosts == {"bracket", "star"}


def test_a_path_duckdb_cannot_take_literally_is_one_line(tmp_path):
    folder = tmp_path / "a\\b[1]"
    proc = qdebug("replay", "--index-only", SAMPLE, "--out", folder, cwd=tmp_path)
    one_line_error(proc, "backslash", "rename it")
    assert proc.returncode == 2
    assert not folder.exists()  # refused before anything was made
