"""Real servers on loopback ports, started and stopped by the tests: `transformers serve`, `qdebug serve`, a faulty one."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.servers import Server, free_port  # noqa: F401  (the endpoint tests import them from here)

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
CHECKPOINT = Path(__file__).resolve().parents[2] / "qdebug" / "demo" / "checkpoint"
HERE = Path(__file__).resolve().parent

def qdebug_server(tmp: Path, inject: str = "none", seed: int = 0, extra: tuple = ()) -> Server:
    """`qdebug serve` on the demo model, tracing into tmp/traces."""
    port = free_port()
    cmd = ["qdebug", "serve", "--port", str(port), "--device", "cpu", "--traces", str(tmp / "traces"), "--inject", inject, "--seed", str(seed), *extra]
    return Server(cmd, port, tmp / "serve.log").wait_ready()


def fault_server(tmp: Path, mode: str, healthy: int = 0, key: str = "") -> Server:
    """tests/endpoint/fault_server.py in one of its modes."""
    port = free_port()
    cmd = [sys.executable, str(HERE / "fault_server.py"), "--port", str(port), "--mode", mode, "--healthy", str(healthy), "--key", key]
    headers = {"Authorization": f"Bearer {key}"} if key else None
    return Server(cmd, port, tmp / f"fault-{mode}.log").wait_ready(headers)


def small_capture(tmp: Path, n: int) -> Path:
    """The first `n` requests of the sample capture, with their images, in tmp."""
    shutil.copytree(SAMPLE / "capture", tmp / "capture", dirs_exist_ok=True)
    lines = (SAMPLE / "capture.jsonl").read_text().splitlines()[:n]
    path = tmp / "capture.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def run_qdebug(*args: str, env: dict | None = None, timeout: float = 420) -> subprocess.CompletedProcess:
    """The installed `qdebug` command, bounded in time."""
    return subprocess.run(["qdebug", *args], capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})


def load_json(path: Path) -> dict:
    return json.loads(Path(path).read_text())


@pytest.fixture(scope="module")
def module_tmp(tmp_path_factory):
    return tmp_path_factory.mktemp("endpoint")
