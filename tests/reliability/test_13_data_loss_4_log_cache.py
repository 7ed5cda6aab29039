"""Issue 21 item 4: a log replaced by another of the same size and mtime is read again, not served from a stale index."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from qdebug.analysis.log_index_build import open_log_index
from qdebug.replay.log_index import cache_key

from .conftest import qdebug

REPO = Path(__file__).resolve().parents[2]
BURST = REPO / "sample_data" / "burst.log"




def _twin_logs(tmp_path: Path) -> tuple[Path, bytes, bytes]:
    """svc.log holding the sample burst, and another log of exactly the same size: requests 51..58, not 41..48."""
    first = BURST.read_bytes()
    second = first.replace(b"request_id=4", b"request_id=5").replace(b"previously 4", b"previously 5")
    assert len(second) == len(first) and second != first
    log = tmp_path / "svc.log"
    log.write_bytes(first)
    return log, first, second


def _replace_keeping_mtime(log: Path, content: bytes, how: str) -> None:
    """Put `content` at `log` (by rename, or rewritten in place) and set the old mtime back, as `cp -p`/rsync would."""
    before = log.stat()
    if how == "rename":
        tmp = log.with_name("incoming.log")
        tmp.write_bytes(content)
        os.replace(tmp, log)
    else:
        with open(log, "r+b") as f:
            f.write(content)
    os.utime(log, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = log.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


def _request_ids(tmp_path: Path, log: Path) -> list[str]:
    out = tmp_path / "r.json"
    proc = qdebug("replay", log, "--json", out, cwd=tmp_path)
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr
    return [r["id"] for r in json.loads(out.read_text())["requests"]]


@pytest.mark.parametrize("how", ["rename", "in-place"])
def test_replaced_log_with_same_size_and_mtime_is_reindexed(tmp_path, how):
    log, _first, second = _twin_logs(tmp_path)
    assert _request_ids(tmp_path, log) == [str(n) for n in range(41, 49)]
    _replace_keeping_mtime(log, second, how)
    assert _request_ids(tmp_path, log) == [str(n) for n in range(51, 59)]  # the new file's requests, not the cached ones


def test_unchanged_log_still_reuses_its_index(tmp_path):
    log, _first, _second = _twin_logs(tmp_path)
    key = cache_key([log])
    index, reused, _ = open_log_index([log])
    index.close()
    assert not reused
    index, reused, _ = open_log_index([log])
    index.close()
    assert reused and cache_key([log]) == key
