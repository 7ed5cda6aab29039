"""Issue 35 item 13: Ctrl-C or SIGTERM while the verdict SQL runs (DuckDB, after the whole log was read) exits 130 or
143 with no traceback (DuckDB swallowed the signal and raised "RuntimeError: Query interrupted", exit 1; a signal
during DuckDB's import aborted the process), and the index that was there is kept. Real signals, to the installed
command, sent once DuckDB is loaded: the scan is over and the SQL phase has begun."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.logs.log_synth import generate_log

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "burst.log"
LINES = 1_500_000
DELAYS = (0.0, 0.02, 0.05, 0.08, 0.12)  # seconds after DuckDB is loaded


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("sql_signals") / "svc.log"
    generate_log(path, LINES, seed=13)
    return path


def _files(folder: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def _signal_in_sql(args: list, sig: int, delay: float) -> subprocess.CompletedProcess | None:
    """Run the installed qdebug, send `sig` `delay` s after DuckDB appears in its memory map; None when it finished first
    (its whole report on stderr, no word of a stop)."""
    exe = os.path.join(os.path.dirname(sys.executable), "qdebug")
    proc = subprocess.Popen([exe, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    maps = Path(f"/proc/{proc.pid}/maps")
    deadline = time.monotonic() + 240
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                if "duckdb" in maps.read_text():
                    break
            except OSError:
                break
            time.sleep(0.005)
        time.sleep(delay)
        if proc.poll() is not None:
            proc.communicate()
            return None
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=240)
    finally:
        proc.kill()
    finished = not any(word in err for word in ("interrupted", "terminated", "Traceback", "qdebug: error"))
    if finished and proc.returncode in (0, 1, -sig):  # the run was over (its report written) when the signal came
        return None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to see DuckDB load")
@pytest.mark.parametrize("sig, code, word", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
def test_a_signal_during_the_index_only_sql_exits_by_its_code_and_keeps_the_old_index(big, tmp_path, sig, code, word):
    out = tmp_path / "idx"
    exe = os.path.join(os.path.dirname(sys.executable), "qdebug")
    assert subprocess.run([exe, "replay", "--index-only", SAMPLE, "--out", out], capture_output=True).returncode == 0
    before = _files(out)
    caught = 0
    for delay in DELAYS:  # several moments of the SQL phase: DuckDB's import, its statements, the writes between
        proc = _signal_in_sql(["replay", "--index-only", big, "--out", out], sig, delay)
        if proc is None:
            continue
        caught += 1
        assert proc.returncode == code, (delay, proc.stderr)
        assert "Traceback" not in proc.stderr and "Query interrupted" not in proc.stderr, proc.stderr
        assert f"after {LINES:,} lines: no index written" in proc.stderr and word in proc.stderr  # the whole log read
        assert _files(out) == before  # the index that was there, byte for byte
        assert sorted(p.name for p in out.iterdir()) == sorted(before)  # no build left in it
    assert caught >= 2, "the runs finished before the signal"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to see DuckDB load")
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_the_replay_sql_exits_by_its_code_and_keeps_the_cache(big, tmp_path, sig, code):
    cache = Path(os.environ["QDEBUG_CACHE_DIR"])
    exe = os.path.join(os.path.dirname(sys.executable), "qdebug")
    assert subprocess.run([exe, "replay", SAMPLE], capture_output=True).returncode == 1  # cached: another log's index
    (entry,) = [p for p in cache.iterdir() if not p.name.startswith(".")]
    before = _files(entry)
    caught = 0
    for delay in DELAYS:
        proc = _signal_in_sql(["replay", big], sig, delay)
        if proc is None:
            continue
        caught += 1
        assert proc.returncode == code, (delay, proc.stderr)
        assert "Traceback" not in proc.stderr and "Query interrupted" not in proc.stderr, proc.stderr
        assert _files(entry) == before
        assert [p.name for p in cache.iterdir()] == [entry.name]  # nothing cached from the stopped run, no build left
    assert caught >= 2, "the runs finished before the signal"
