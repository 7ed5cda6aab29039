"""Start tests/reliability/hostile_server.py in a mode, and a two-request capture to send it."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from tests.servers import Server, free_port

HERE = Path(__file__).resolve().parent
SAMPLE = HERE.parents[1] / "sample_data"


def hostile_server(tmp: Path, mode: str, mb: int = 1024) -> Server:
    """The hostile server in `mode`, ready on a free loopback port."""
    port = free_port()
    cmd = [sys.executable, str(HERE / "hostile_server.py"), "--port", str(port), "--mode", mode, "--mb", str(mb)]
    return Server(cmd, port, tmp / f"hostile-{mode}.log").wait_ready()


def small_capture(tmp: Path, n: int = 2) -> Path:
    """The first `n` requests of the sample capture, with their images, in tmp."""
    shutil.copytree(SAMPLE / "capture", tmp / "capture", dirs_exist_ok=True)
    path = tmp / "capture.jsonl"
    path.write_text("\n".join((SAMPLE / "capture.jsonl").read_text().splitlines()[:n]) + "\n")
    return path


def strict_json(text: str):
    """json.loads that refuses NaN and Infinity (what every JSON parser but Python's does)."""
    def refuse(name):
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)
