"""Issue 21 item 2: `qdebug serve --traces T` restarted on the same T keeps the earlier run's traces and ids."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import httpx
import pytest

from qdebug.serve.app import next_trace_number
from tests.servers import Server, free_port

REPO = Path(__file__).resolve().parents[2]
IMAGE = REPO / "sample_data" / "red_circle_top_left.png"


@pytest.fixture(autouse=True)
def _this_tree(monkeypatch):
    """The `qdebug` subprocess runs this checkout's code (its editable install may point at another copy)."""
    monkeypatch.setenv("PYTHONPATH", str(REPO))


def _serve_once(tmp_path: Path, traces: Path, run: int) -> dict:
    """Start `qdebug serve` on `traces`, answer one real chat request, stop it; the answer's JSON."""
    port = free_port()
    cmd = ["qdebug", "serve", "--port", str(port), "--device", "cpu", "--traces", str(traces)]
    server = Server(cmd, port, tmp_path / f"serve-{run}.log").wait_ready()
    try:
        url = "data:image/png;base64," + base64.b64encode(IMAGE.read_bytes()).decode("ascii")
        body = {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                                           {"type": "text", "text": "Describe the image."}]}],
                "max_tokens": 4, "temperature": 0, "stream": False}
        response = httpx.post(f"{server.url}/v1/chat/completions", json=body, headers={"X-Qdebug-Request": f"run-{run}"}, timeout=120)
        assert response.status_code == 200, response.text
        return response.json()
    finally:
        server.stop()


def test_restart_on_the_same_folder_continues_numbering_and_ids(tmp_path):
    traces = tmp_path / "traces"
    first = _serve_once(tmp_path, traces, 1)
    kept = (traces / "000001.qdt").read_bytes()
    second = _serve_once(tmp_path, traces, 2)
    assert first["id"] != second["id"]  # a client or log keyed by server id never mixes the two runs
    assert (traces / "000001.qdt").read_bytes() == kept  # the first run's trace is untouched
    assert sorted(p.name for p in traces.iterdir()) == ["000001.qdt", "000002.qdt", "index.jsonl"]
    index = [json.loads(line) for line in (traces / "index.jsonl").read_text().splitlines()]
    assert [(e["n"], e["trace"], e["client_request"]) for e in index] == [(1, "000001.qdt", "run-1"), (2, "000002.qdt", "run-2")]
    assert [e["id"] for e in index] == [first["id"], second["id"]]
    from qdebug.trace.schema import load_trace

    assert load_trace(traces / "000002.qdt").generated_text == second["choices"][0]["message"]["content"]
    assert "from 000002.qdt" in (tmp_path / "serve-2.log").read_text()  # the restart says where it continues


def test_next_number_counts_files_and_index_lines(tmp_path):
    assert next_trace_number(None) == 1 and next_trace_number(tmp_path) == 1
    (tmp_path / "000007.qdt").write_bytes(b"")
    (tmp_path / "notes.qdt").write_bytes(b"")
    assert next_trace_number(tmp_path) == 8
    (tmp_path / "index.jsonl").write_text('{"n": 12, "trace": "000012.qdt"}\n{torn\n[1, 2]\n{"n": "40"}\n')
    assert next_trace_number(tmp_path) == 13  # a trace deleted by hand still keeps its number retired
