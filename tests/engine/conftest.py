"""A real vLLM, started by the tests: one traced server for the session (plugin on, requests tagged by the tests)."""

from __future__ import annotations

import os

import pytest

from .vllm_server import VllmServer, vllm_python


@pytest.fixture(scope="session")
def vllm_py():
    """The vLLM environment's python; CI builds it (scripts/vllm-env), so there a missing one fails."""
    py = vllm_python()
    if py is None:
        if os.environ.get("CI"):
            pytest.fail("no vLLM environment: .ci/run builds it with scripts/vllm-env")
        pytest.skip("no vLLM environment here (scripts/vllm-env builds it)")
    return py


@pytest.fixture(scope="session")
def traced_server(vllm_py, tmp_path_factory):
    """vLLM serving the demo checkpoint (float32) with qdebug's plugin writing traces to `server.traces`, and its
    endpoint plugin serving them over HTTP (VLLM_PLUGINS=qdebug)."""
    work = tmp_path_factory.mktemp("vllm")
    traces = work / "traces"
    with VllmServer(vllm_py, work, trace_dir=traces, extra_env={"VLLM_PLUGINS": "qdebug"}) as server:
        server.traces = traces
        yield server
