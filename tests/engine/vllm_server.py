"""A real vLLM OpenAI server on a loopback port, in the environment scripts/vllm-env builds; started and stopped by
the engine tests and by benchmarks/engine.py."""

from __future__ import annotations

import os
from pathlib import Path

from tests.servers import Server, free_port

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


class VllmServer(Server):
    """`python -m vllm.entrypoints.openai.api_server` serving `model` (eager; float32 unless `dtype` says) in its own process group.

    `trace_dir` turns qdebug's plugin on (QDEBUG_VLLM_TRACE_DIR); `trace_all` traces every request. The server
    runs in `workdir` (never the repo: a `qdebug.egg-info` there would shadow the installed plugin's metadata).
    """

    start_limit = START_LIMIT

    def __init__(self, python: Path, workdir: Path, *, model: Path = DEMO, trace_dir: Path | None = None, trace_all: bool = False,
                 served_name: str = "demo", dtype: str = "float32", extra_env: dict | None = None, extra_args: tuple[str, ...] = ()) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("QDEBUG_VLLM_TRACE")}
        env.update(ENGINE_ENV)
        # The vLLM environment is cached and shared by every checkout (scripts/vllm-env); its editable qdebug points at
        # the checkout that ran the script last, which may be gone. The server imports this checkout's plugin.
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
        if trace_dir is not None:
            env["QDEBUG_VLLM_TRACE_DIR"] = str(trace_dir)
        if trace_all:
            env["QDEBUG_VLLM_TRACE"] = "all"
        env.update(extra_env or {})
        port = free_port()
        cmd = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--served-model-name", served_name,
               "--host", "127.0.0.1", "--port", str(port), "--enforce-eager", "--max-model-len", "1024", "--dtype", dtype,
               *extra_args]
        super().__init__(cmd, port, workdir / f"vllm-{port}.log", env, cwd=workdir, group=True, replace_env=True)

    def log_text(self) -> str:
        """What the server (and its engine and worker processes) printed so far."""
        return self.log.read_text(errors="replace")

    def said(self, text: str, timeout: float = 30.0) -> bool:
        """Whether the server's log holds `text` within `timeout` s: a worker's lines reach the log through vLLM's
        forwarding of its output, which can trail what the worker already did (a fault it planted, a check it ran)."""
        import time

        deadline = time.monotonic() + timeout
        while text not in self.log_text():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.25)
        return True

    def __enter__(self) -> "VllmServer":
        self.wait_ready()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
