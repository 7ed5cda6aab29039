"""A real vLLM OpenAI server on a loopback port, in the environment scripts/vllm-env builds; started and stopped by
the engine tests and by benchmarks/engine.py."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "qdebug" / "demo" / "checkpoint"
START_LIMIT = 300  # seconds vLLM may take to answer /v1/models (about 30 s warm, 60+ s on a cold disk)
ENGINE_ENV = {  # the CPU build's settings (README, "Debugging a vLLM deployment")
    "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_HOST_IP": "127.0.0.1", "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
    "VLLM_DO_NOT_TRACK": "1",
}


def vllm_python() -> Path | None:
    """The vLLM environment's python: $QDEBUG_VLLM_PYTHON, else the repo's .venv-vllm (None when neither exists)."""
    given = os.environ.get("QDEBUG_VLLM_PYTHON")
    path = Path(given) if given else REPO / ".venv-vllm" / "bin" / "python"
    return path if path.exists() else None


def free_port() -> int:
    """A port nothing listens on right now (the OS picks it)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class VllmServer:
    """`python -m vllm.entrypoints.openai.api_server` serving `model` (float32, eager) in its own process group.

    `trace_dir` turns qdebug's plugin on (QDEBUG_VLLM_TRACE_DIR); `trace_all` traces every request. The server
    runs in `workdir` (never the repo: a `qdebug.egg-info` there would shadow the installed plugin's metadata).
    """

    def __init__(self, python: Path, workdir: Path, *, model: Path = DEMO, trace_dir: Path | None = None, trace_all: bool = False,
                 served_name: str = "demo", extra_env: dict | None = None, extra_args: tuple[str, ...] = ()) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / f"vllm-{self.port}.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("QDEBUG_VLLM_TRACE")}
        env.update(ENGINE_ENV)
        if trace_dir is not None:
            env["QDEBUG_VLLM_TRACE_DIR"] = str(trace_dir)
        if trace_all:
            env["QDEBUG_VLLM_TRACE"] = "all"
        env.update(extra_env or {})
        cmd = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--served-model-name", served_name,
               "--host", "127.0.0.1", "--port", str(self.port), "--enforce-eager", "--max-model-len", "1024", "--dtype", "float32",
               *extra_args]
        self._out = open(self.log, "wb")
        self.proc = subprocess.Popen(cmd, cwd=workdir, stdout=self._out, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def wait_ready(self) -> "VllmServer":
        """Block until /v1/models answers (RuntimeError with the log's tail when the server dies or never answers)."""
        deadline = time.monotonic() + START_LIMIT
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                if httpx.get(f"{self.url}/v1/models", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"vLLM did not start: {self.log_text()[-3000:]}")

    def log_text(self) -> str:
        """What the server (and its engine and worker processes) printed so far."""
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        """SIGTERM the whole process group (API server, engine core, worker), SIGKILL what is left after 30 s."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
            except ProcessLookupError:
                pass
        try:  # children that outlived the leader
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self._out.close()

    def __enter__(self) -> "VllmServer":
        return self.wait_ready()

    def __exit__(self, *exc) -> None:
        self.stop()
