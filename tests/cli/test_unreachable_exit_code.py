"""Issue 36: a server that cannot be reached exits 6, its own documented code, never 1 (the code for "the runs differ"
or "a problem was found"), so a CI gate can tell a down server from a finding; the error is one line naming it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
IMAGE = ROOT / "sample_data" / "red_circle_top_left.png"


def _qdebug(*args: str) -> subprocess.CompletedProcess:
    exe = os.path.join(os.path.dirname(sys.executable), "qdebug")
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=300, cwd=ROOT)


@pytest.mark.parametrize("command", [
    ["diff", str(IMAGE), "Describe the image.", "--engine"],
    ["replay", "sample_data/capture.jsonl", "--endpoint"],
])
def test_an_unreachable_server_exits_6_with_one_line(command, tmp_path):
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    proc = _qdebug(*command, url, "--json", str(tmp_path / "out.json"))
    assert proc.returncode == 6, proc.stdout + proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"qdebug: error: cannot reach {url}"), proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out.json").exists()
