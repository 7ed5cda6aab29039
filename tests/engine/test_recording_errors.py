"""The plugin never fails a request: an error while recording is logged by the engine, and the request is answered
as without the plugin."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from .vllm_server import DEMO, ENGINE_ENV, VllmServer
from .client import SAMPLE, request_for, send

pytestmark = pytest.mark.vllm
HERE = os.path.dirname(__file__)


def test_an_error_inside_the_recording_is_logged_and_the_request_still_answered(vllm_py, tmp_path):
    traces = tmp_path / "traces"
    env = {**os.environ, **ENGINE_ENV, "QDEBUG_VLLM_TRACE_DIR": str(traces)}
    out = subprocess.run([str(vllm_py), os.path.join(HERE, "offline_fault.py"), str(DEMO), str(SAMPLE / "red_circle_top_left.png"), str(traces)],
                         capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    assert doc["faulty"] == doc["plain"] and doc["plain"].strip() == "a red circle in the top left"
    assert "qdebug: recording failed (RuntimeError: planted fault in qdebug's recording)" in out.stdout + out.stderr
    # no trace, not even a partial one (the batch log, written for every request the engine runs, and the worker's
    # clock stay); a request ran after the faulty one, so a trace of it would have been written by now
    assert [f for f in doc["files"] if f not in ("batches.jsonl", "batches.1.jsonl") and not f.startswith("clock-")] == [], doc["files"]


def test_an_unusable_trace_folder_leaves_the_server_answering(vllm_py, tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the trace folder should be")
    with VllmServer(vllm_py, tmp_path, trace_dir=blocker / "traces") as server:
        server.traces = blocker / "traces"
        assert send(server, request_for("red_circle_top_left.png"), "nowhere").strip() == "a red circle in the top left"
        assert "qdebug: not tracing this worker" in server.log_text()
        # no endpoint plugin on this server (VLLM_PLUGINS unset): diff --engine without a folder says how to get one
        from tests.endpoint.conftest import run_qdebug

        result = run_qdebug("diff", str(SAMPLE / "red_circle_top_left.png"), "Describe the image.", "--engine", server.url, "--timeout", "5")
        assert result.returncode == 1 and "VLLM_PLUGINS=qdebug" in result.stderr and "Traceback" not in result.stderr
    assert blocker.read_text() == "a file where the trace folder should be"
