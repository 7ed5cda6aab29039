"""Real servers on loopback ports, started and stopped by the tests: `transformers serve`, `qdebug serve`, a faulty one."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
CHECKPOINT = Path(__file__).resolve().parents[2] / "qdebug" / "demo" / "checkpoint"
HERE = Path(__file__).resolve().parent
START_LIMIT = 180  # seconds a server may take to answer /v1/models


def free_port() -> int:
    """A port nothing listens on right now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A server process on a loopback port; `stop()` ends it (and only it)."""

    def __init__(self, cmd: list[str], port: int, log: Path, env: dict | None = None):
        self.port, self.log = port, log
        self.url = f"http://127.0.0.1:{port}"
        self._out = open(log, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self._out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})

    def wait_ready(self, headers: dict | None = None) -> "Server":
        deadline = time.monotonic() + START_LIMIT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                if httpx.get(f"{self.url}/v1/models", timeout=2, headers=headers or {}).status_code < 500:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"server did not start: {self.log.read_text(errors='replace')[-2000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)  # uvicorn waits for in-flight requests; a hanging one never ends
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._out.close()


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
