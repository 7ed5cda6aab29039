"""Run the installed `qdebug` against a hostile watch source: its exit, output, seconds and peak memory, with a wall
limit (a hang is an exit of None) and an address-space ceiling (a regression fails the test, never the machine)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .test_14_endpoint_answers import _high_water_kib  # a running process's own peak RSS

CEILING = 4 << 30  # bytes of address space the child may map


@dataclass
class Run:
    """One run: exit code (None: still running at the limit, then killed), stdout, stderr, seconds, peak RSS (MiB)."""

    code: int | None
    out: str
    err: str
    seconds: float
    peak_mib: float


def _ceiling() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CEILING, CEILING))


def run_qdebug(tmp: Path, *args, limit: float = 60) -> Run:
    """`qdebug ARGS` with no terminal (stdin from /dev/null, streams to files)."""
    exe = os.path.join(os.path.dirname(sys.executable), "qdebug")
    out_path, err_path = tmp / "run.out", tmp / "run.err"
    started = time.monotonic()
    with open(out_path, "w") as out, open(err_path, "w") as err:
        child = subprocess.Popen([exe, *map(str, args)], stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                 preexec_fn=_ceiling)
        peak, code = 0, None
        while True:
            peak = max(peak, _high_water_kib(child.pid))  # read while it runs: its own high-water mark
            pid, status, _ = os.wait4(child.pid, os.WNOHANG)
            if pid:
                code = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() > started + limit:
                child.kill()
                child.wait()
                break
            time.sleep(0.02)
    return Run(code, out_path.read_text(), err_path.read_text(), time.monotonic() - started, peak / 1024)


def one_line(run: Run, code: int, *words: str) -> str:
    """Assert exit `code`, one `qdebug: error:` line holding `words`, no traceback; the line."""
    assert run.code == code, (run.code, run.out[-2000:], run.err[-2000:])
    assert "Traceback" not in run.err, run.err[-3000:]
    lines = [ln for ln in run.err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("qdebug: error: "), run.err[-3000:]
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]
