"""A server process on a loopback port, started and stopped by a test (or a benchmark): the one way tests run servers."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx

START_LIMIT = 180  # seconds a server may take to answer /v1/models


def free_port() -> int:
    """A port nothing listens on right now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A server process on a loopback port; `stop()` ends it (and only it).

    `group=True` starts it in a process group of its own, and `stop()` ends the whole group (a server that forks
    workers, as vLLM does: API server, engine core, worker).
    """

    start_limit = START_LIMIT

    def __init__(self, cmd: list[str], port: int, log: Path, env: dict | None = None, *, cwd: Path | None = None,
                 group: bool = False, replace_env: bool = False):
        self.port, self.log, self.group = port, log, group
        self.url = f"http://127.0.0.1:{port}"
        self._out = open(log, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self._out, stderr=subprocess.STDOUT, cwd=cwd, start_new_session=group,
                                     env=dict(env or {}) if replace_env else {**os.environ, **(env or {})})

    def wait_ready(self, headers: dict | None = None) -> "Server":
        deadline = time.monotonic() + self.start_limit
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
        if self.group:
            self._stop_group()
        elif self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)  # uvicorn waits for in-flight requests; a hanging one never ends
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._out.close()

    def _stop_group(self) -> None:
        """SIGTERM the process group, SIGKILL what is left after 30 s (children that outlive the leader too)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
            except ProcessLookupError:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
