"""Issue 21 items 6 and 7: `replay --endpoint` bounds each whole answer in time (`--timeout`, not per byte) and in
size (`--max-answer-mb`, counted once decompressed): a trickling server, a gzip bomb or a huge body is one error line
per request, with memory and time bounded."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from .conftest import qdebug
from .hostile import hostile_server, small_capture, strict_json


def _replay(tmp_path, server, *options, timeout=120):
    """(process, JSON report, seconds, peak RSS in MiB) of one `qdebug replay --endpoint` run."""
    out = tmp_path / "r.json"
    args = ["replay", small_capture(tmp_path, 1), "--endpoint", server.url, "--repeat", "1", "--retries", "0", "--json", out, *options]
    exe = os.path.join(os.path.dirname(sys.executable), "qdebug")
    started = time.monotonic()
    with open(tmp_path / "stderr", "w+") as err:
        child = subprocess.Popen([exe, *map(str, args)], stdout=subprocess.DEVNULL, stderr=err)
        pid, peak = 0, 0
        while pid == 0:
            if time.monotonic() > started + timeout:
                child.kill()
            # its own high-water mark, read while it runs: wait4's ru_maxrss would also count this test process's
            # memory at fork time (Linux carries it across exec), gigabytes late in a full test session
            peak = max(peak, _high_water_kib(child.pid))
            pid, status, _ = os.wait4(child.pid, os.WNOHANG)
            time.sleep(0.02)
        child.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        proc = subprocess.CompletedProcess(args, child.returncode, "", err.read())
    return proc, strict_json(out.read_text()) if out.exists() else None, time.monotonic() - started, peak / 1024


def _high_water_kib(pid: int) -> int:
    """A running process's peak resident memory (VmHWM, KiB); 0 once it has exited."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def test_timeout_bounds_the_whole_answer(tmp_path):
    server = hostile_server(tmp_path, "trickle")
    try:
        proc, doc, took, _ = _replay(tmp_path, server, "--timeout", "3")
    finally:
        server.stop()
    assert proc.returncode == 1, proc.stderr  # an error per request: a problem found
    assert "Traceback" not in proc.stderr
    assert doc["requests"][0]["error"].startswith("isolated request failed: timeout: no answer within 3 s"), doc["requests"]
    assert took < 40, took  # one 3 s answer (and start-up); before, each byte restarted the read timeout


def test_gzip_bomb_is_refused_by_its_decompressed_size(tmp_path):
    server = hostile_server(tmp_path, "bomb", mb=1024)  # 1 GiB of JSON whitespace in about 1 MiB of gzip
    try:
        proc, doc, _, rss = _replay(tmp_path, server, "--max-answer-mb", "16")
    finally:
        server.stop()
    assert "Traceback" not in proc.stderr and proc.returncode == 1, proc.stderr
    error = doc["requests"][0]["error"]
    assert "answer too large" in error and "once decompressed" in error and "--max-answer-mb 16" in error, error
    assert len(error.splitlines()) == 1
    assert rss < 700, rss  # the qdebug process never held the expanded gigabyte


def test_huge_body_is_refused_at_the_default_limit(tmp_path):
    server = hostile_server(tmp_path, "big", mb=300)
    try:
        proc, doc, _, rss = _replay(tmp_path, server)
    finally:
        server.stop()
    assert "Traceback" not in proc.stderr and proc.returncode == 1, proc.stderr
    error = doc["requests"][0]["error"]
    assert "answer too large: over 67,108,864 bytes" in error and "--max-answer-mb 64" in error, error
    assert (tmp_path / "r.json").stat().st_size < 1 << 20  # the report holds the error, not the body
    assert rss < 700, rss


def test_max_answer_mb_must_be_positive(tmp_path):
    proc = qdebug("replay", small_capture(tmp_path, 1), "--endpoint", "http://127.0.0.1:9", "--max-answer-mb", "0")
    assert proc.returncode == 2 and "--max-answer-mb 0" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
