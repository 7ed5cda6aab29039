"""Issue 49 items 6 and 8: `replay --endpoint --engine-traces` when the engine's traces cannot be used.

Item 8: a vLLM started beside a folder named `qdebug` imports it instead of the plugin, logs "not tracing this
worker (ImportError ...)" and serves on; the replay read 0 of 4 traces, called every request `ok`, exit 0, and advised
--concurrency. A replay that asked for the engine's evidence and read none compared nothing: it says so with the
cause, and exits 5 (cannot compare). Some traces missing: the requests without them are named.
Item 6: traces whose tensors are all NaN made every request `contaminated` ("24 from unmatched"), exit 1. A trace
whose rows are not finite is a `nan_inf` finding, its request judged by its answers and never blamed; all of them: 5.

The server is a real loopback one (tests/reliability/trace_server.py) that writes each tagged request's trace with
the plugin's own TraceDir, as vLLM's worker would.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.servers import Server, free_port

from .conftest import qdebug
from .hostile import small_capture

HERE = Path(__file__).resolve().parent
TRACE = HERE.parent / "data" / "red_circle.qdt"


def engine_template(tmp: Path) -> Path:
    """The saved demo trace as a vLLM worker would have written it (its meta names the engine)."""
    from qdebug.trace.schema import load_trace, save_trace

    trace = load_trace(TRACE)
    trace.meta.engine = {"name": "vllm", "version": "test"}
    path = tmp / "engine-template.qdt"
    save_trace(trace, path)
    return path


def replay(tmp: Path, mode: str, *extra: str):
    """`qdebug replay` of a two-request capture against the trace server in `mode`; (process, JSON document, folder)."""
    capture = small_capture(tmp)
    traces = tmp / "traces"
    port = free_port()
    server = Server([sys.executable, str(HERE / "trace_server.py"), "--port", str(port), "--mode", mode, "--template",
                     str(engine_template(tmp)), "--traces", str(traces)], port, tmp / f"trace-server-{mode}.log").wait_ready()
    out = tmp / "r.json"
    try:
        proc = qdebug("replay", capture, "--endpoint", server.url, "--engine-traces", traces, "--timeout", "4", "--json", out,
                      *extra, timeout=180)
    finally:
        server.stop()
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc, json.loads(out.read_text()), traces


def kinds(doc: dict, kind: str) -> list[dict]:
    return [f for f in doc["findings"] if f["kind"] == kind]


def test_traces_that_all_fit_are_compared(tmp_path):
    """The server traces every request: 4 of 4 read, every request ok, exit 0 (the baseline the others depart from)."""
    proc, doc, _ = replay(tmp_path, "ok")
    assert proc.returncode == 0, proc.stderr
    assert doc["engine_traces"]["read"] == doc["engine_traces"]["expected"] == 4 and doc["engine_traces"]["compared"] is True
    assert {r["verdict"] for r in doc["requests"]} == {"ok"}


def test_no_trace_read_is_cannot_compare_with_the_cause(tmp_path):
    proc, doc, traces = replay(tmp_path, "none")
    assert proc.returncode == 5, proc.stderr  # not ok: nothing inside the engine was compared
    errors = [line for line in proc.stderr.splitlines() if line.startswith("qdebug: error: ")]
    assert len(errors) == 1 and "none of the 4 traces" in errors[0] and "nothing was compared inside the engine" in errors[0], proc.stderr
    assert "not tracing this worker" in errors[0] and "ImportError" in errors[0] and f"{traces} holds no trace at all" in errors[0]
    assert doc["engine_traces"]["read"] == 0 and doc["engine_traces"]["compared"] is False
    assert "nothing compared inside the engine" in doc["engine_traces"]["said"]
    said = kinds(doc, "partial_comparison")
    assert any(f["severity"] == "error" and "nothing was compared" in f["message"] for f in said), doc["findings"]
    assert not kinds(doc, "burst_not_batched") and "--concurrency" not in proc.stdout + proc.stderr  # no advice from no evidence


def test_no_trace_read_is_cannot_compare_even_with_exit_zero(tmp_path):
    proc, _, _ = replay(tmp_path, "none", "--exit-zero")
    assert proc.returncode == 5, proc.stderr


def test_some_traces_missing_name_the_requests_left_to_their_answers(tmp_path):
    proc, doc, _ = replay(tmp_path, "first")
    assert proc.returncode == 0, proc.stderr  # what was compared agrees; the rest is said
    ids = [r["id"] for r in doc["requests"]]
    assert doc["engine_traces"]["read"] == 2 and doc["engine_traces"]["missing"] == 2 and doc["engine_traces"]["compared"] is True
    (missing,) = [f for f in kinds(doc, "partial_comparison") if "never appeared" in f["message"]]
    untraced = [r for r in ids if f"request(s) {r} carry no engine evidence" in missing["message"]]  # the server traced one
    assert len(untraced) == 1 and missing["request_id"] == untraced[0], missing
    assert doc["engine_traces"]["batching"] == [None]  # a burst of missing traces: its batching not guessed
    assert not kinds(doc, "burst_not_batched")


def test_all_nan_traces_blame_no_request_and_cannot_compare(tmp_path):
    proc, doc, _ = replay(tmp_path, "nan")
    assert proc.returncode == 5, proc.stderr
    assert {r["verdict"] for r in doc["requests"]} == {"ok"}, doc["requests"]  # the answers agree: no one is contaminated
    assert not kinds(doc, "engine_contamination") and not kinds(doc, "contamination"), doc["findings"]
    nan = kinds(doc, "nan_inf")
    assert len(nan) == 4 and all("non-finite" in f["message"] and "not called contaminated" in f["message"] for f in nan), nan
    assert "non-finite values" in proc.stderr and doc["engine_traces"]["non_finite"] == 4


def test_one_requests_nan_traces_cost_only_its_engine_evidence(tmp_path):
    proc, doc, _ = replay(tmp_path, "nan-first")
    assert proc.returncode == 0, proc.stderr
    assert {r["verdict"] for r in doc["requests"]} == {"ok"} and not kinds(doc, "engine_contamination"), doc["findings"]
    nan = kinds(doc, "nan_inf")
    assert len(nan) == 2 and len({f["request_id"] for f in nan}) == 1, nan  # its alone and burst traces
    assert doc["engine_traces"]["read"] == 2 and doc["engine_traces"]["compared"] is True
