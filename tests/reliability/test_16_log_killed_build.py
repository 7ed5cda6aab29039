"""Issue 35 item 5: a SIGKILLed `--index-only` leaves its build where the README's fleet query
(`read_parquet('fleet/*/events-*.parquet')`) does not read it, and the next run removes it once its process is gone
(a build whose process still runs is left alone). A killed `replay LOG` build in the cache is cleared the same way."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import duckdb

from tests.logs.log_synth import generate_log

from .conftest import qdebug

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "burst.log"


def _kill_when(proc: subprocess.Popen, ready) -> None:
    """SIGKILL the process once ready() holds (the build has written events), as the OOM killer or `kill -9` does."""
    deadline = time.monotonic() + 180
    while proc.poll() is None and time.monotonic() < deadline and not ready():
        time.sleep(0.02)
    assert proc.poll() is None, "the run ended before it could be killed mid-build"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)


def _big_part(pattern_root: Path, pattern: str):
    return lambda: any(p.stat().st_size > 1 << 20 for p in pattern_root.glob(pattern))


def test_a_killed_index_only_build_is_never_read_by_the_fleet_query_and_is_cleared_next_run(tmp_path):
    fleet = tmp_path / "fleet"
    a = fleet / "a"
    assert qdebug("replay", "--index-only", SAMPLE, "--out", a, "--host", "a").returncode == 0
    query = f"SELECT count(*) FROM read_parquet('{fleet}/*/events-*.parquet')"  # the README's fleet query
    rows = duckdb.sql(query).fetchall()[0][0]
    assert rows == 33  # burst.log's events
    before = {p.name: p.read_bytes() for p in a.iterdir()}

    big = tmp_path / "svc.log"
    generate_log(big, 600_000, seed=4)
    exe = os.path.join(os.path.dirname(sys.executable), "qdebug")
    proc = subprocess.Popen([exe, "replay", "--index-only", str(big), "--out", str(a), "--host", "a"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _kill_when(proc, _big_part(a, ".qdebug-index.*.building/index/events-*.parquet"))
    (left,) = [p for p in a.iterdir() if p.name.endswith(".building")]  # what a killed run leaves: a hidden build
    assert duckdb.sql(query).fetchall()[0][0] == rows  # ... which the fleet query does not read
    assert {p.name: p.read_bytes() for p in a.iterdir() if p != left} == before  # the index there is as it was

    # a build whose process still runs (this test's own) is never touched
    live = a / f".qdebug-index.{os.getpid()}.live.building"
    live.mkdir()
    (live / ".owner").write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid()}))
    proc = qdebug("replay", "--index-only", SAMPLE, "--out", a, "--host", "a")
    assert proc.returncode == 0, proc.stderr
    assert not left.exists()  # the dead run's build is gone
    assert live.exists()
    assert duckdb.sql(query).fetchall()[0][0] == rows


def test_a_killed_replay_build_in_the_cache_is_cleared_by_the_next_build(tmp_path):
    cache = Path(os.environ["QDEBUG_CACHE_DIR"])
    big = tmp_path / "svc.log"
    generate_log(big, 600_000, seed=6)
    exe = os.path.join(os.path.dirname(sys.executable), "qdebug")
    proc = subprocess.Popen([exe, "replay", str(big)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _kill_when(proc, _big_part(cache, "*.building/events-*.parquet"))
    (left,) = [p for p in cache.iterdir() if p.name.endswith(".building")]
    assert json.loads((left / ".owner").read_text())["pid"] == proc.pid
    assert qdebug("replay", SAMPLE).returncode == 1  # another log: a cache miss, whose build prunes (exit 1: contaminated)
    assert not left.exists()  # cleared now, not a day later
    assert [p.name for p in cache.iterdir() if p.name.startswith(".")] == []
