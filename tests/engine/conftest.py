"""A real vLLM, started by the tests: one traced server for the session (plugin on, requests tagged by the tests)."""

from __future__ import annotations

import pytest

from tests.built_envs import built_python

from .vllm_server import VllmServer, vllm_python


@pytest.fixture(scope="session")
def vllm_py():
    """The vLLM environment's python; CI builds it (scripts/vllm-env), so there a missing one fails."""
    return built_python(vllm_python(), "vLLM", "scripts/vllm-env")


@pytest.fixture(scope="session")
def traced_server(vllm_py, tmp_path_factory):
    """vLLM serving the demo checkpoint (float32) with qdebug's plugin writing traces to `server.traces`, and its
    endpoint plugin serving them over HTTP (VLLM_PLUGINS=qdebug)."""
    work = tmp_path_factory.mktemp("vllm")
    traces = work / "traces"
    with VllmServer(vllm_py, work, trace_dir=traces, extra_env={"VLLM_PLUGINS": "qdebug"}) as server:
        server.traces = traces
        yield server
