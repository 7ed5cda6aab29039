"""With vLLM's offline engine, the last traced request is written too: the worker learns that a request finished only
from the next step, and none runs after the last one, so the plugin writes what it still holds when the worker exits,
and says how each such request had ended."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from qdebug.trace.schema import load_trace

from .client import SAMPLE
from .vllm_server import DEMO, ENGINE_ENV, REPO

pytestmark = pytest.mark.vllm
HERE = os.path.dirname(__file__)


def test_the_last_request_of_an_offline_engine_is_written_at_exit(vllm_py, tmp_path):
    traces = tmp_path / "traces"
    env = {**os.environ, **ENGINE_ENV, "QDEBUG_VLLM_TRACE_DIR": str(traces), "PYTHONPATH": str(REPO)}  # this checkout's plugin
    out = subprocess.run([str(vllm_py), os.path.join(HERE, "offline_shutdown.py"), str(DEMO), str(SAMPLE / "red_circle_top_left.png")],
                         capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    answers = json.loads(next(line for line in out.stdout.splitlines() if line.startswith('{"first"')))  # vLLM logs after it
    assert len(answers["last"]) == 4 and answers["last"] == answers["first"][:4]  # greedy, same request, cut at 4 tokens
    first, last = load_trace(traces / "first.qdt"), load_trace(traces / "last.qdt")
    assert first.generated_ids == answers["first"] and "closed_at_shutdown" not in first.meta.engine
    # the last one: every token it was answered with, and how it had ended (from its tokens: max_tokens here)
    assert last.generated_ids == answers["last"]
    assert last.meta.engine["closed_at_shutdown"] == {"ended": "max_tokens", "tokens": 4}
    assert "qdebug: request" in out.stdout + out.stderr and "written at shutdown (max_tokens)" in out.stdout + out.stderr
    # the same prompt recorded alike, and a decode step for each token after the first
    assert last.meta.engine["request_id"] != first.meta.engine["request_id"]
    assert set(last.stages) <= set(first.stages)
    assert sum(name.startswith("step.") for name in last.stages) >= 3
    index = [json.loads(line) for line in (traces / "index.jsonl").read_text().splitlines()]
    assert sorted(line["trace"] for line in index) == ["first.qdt", "last.qdt"]
