"""The installed `qdebug` command against a real vLLM: `replay --endpoint` of the sample capture and `diff --engine`."""

from __future__ import annotations

import json

import pytest

from tests.endpoint.conftest import SAMPLE, run_qdebug

pytestmark = pytest.mark.vllm


def test_replay_endpoint_of_the_sample_capture_is_all_ok_and_equals_the_local_references(traced_server, tmp_path):
    out = tmp_path / "r.json"
    result = run_qdebug("replay", str(SAMPLE / "capture.jsonl"), "--endpoint", traced_server.url, "--concurrency", "4",
                        "--model", "demo", "--device", "cpu", "--json", str(out))
    doc = json.loads(out.read_text())
    verdicts = {r["id"]: r["verdict"] for r in doc["requests"]}
    assert set(verdicts.values()) == {"ok"}, verdicts
    assert len(verdicts) == 14
    kinds = {f["kind"] for f in doc["findings"]}
    assert not kinds & {"contamination", "server_mismatch", "nondeterminism", "request_error"}, doc["findings"]
    detok = [f for f in doc["findings"] if f["kind"] == "detokenization"]
    for r in doc["requests"]:
        # the server's answer is the model's answer, up to the whitespace vLLM puts before the first word
        assert r["reference"] != r["local_reference"] and r["reference"].strip() == r["local_reference"]
        assert any(f["request_id"] == r["id"] and "leading whitespace" in f["message"] for f in detok)
    assert result.returncode == 0, result.stderr  # the capture's own `observed` findings do not fail an ok replay


def test_diff_engine_agrees_at_every_stage_and_the_report_says_the_json(traced_server, tmp_path):
    out = tmp_path / "d.json"
    result = run_qdebug("diff", str(SAMPLE / "red_circle_top_left.png"), "Describe the image.", "--engine", traced_server.url,
                        "--engine-traces", str(traced_server.traces), "--json", str(out), env={"COLUMNS": "200"})
    assert result.returncode == 0, result.stdout + result.stderr
    doc = json.loads(out.read_text())
    assert doc["first_divergence"] is None and doc["texts_agree"]
    assert [s["name"] for s in doc["stages"]][:7] == ["preprocess", "encode", "sync", "layer.0", "layer.1", "layer.2", "layer.3"]
    assert {s["verdict"] for s in doc["stages"]} == {"ok"}
    assert doc["tolerance"] == {"atol": 1e-5, "rtol": 1e-4}  # the engine tolerance, float32
    assert doc["b"]["label"].startswith("B vllm 0.32") and doc["a"]["label"] == "A transformers float32"
    assert [f["kind"] for f in doc["findings"]] == ["detokenization"]
    report = result.stdout
    assert "no stage beyond tolerance" in report and "atol 1e-05, rtol 0.0001" in report
    for stage in doc["stages"]:  # one story: every stage's verdict and max |diff| as the JSON says
        row = next(line for line in report.splitlines() if f" {stage['name']} " in line)
        assert stage["verdict"] in row and f"{stage['max_abs']:.3g}" in row


def test_diff_engine_without_the_plugin_folder_is_one_line(traced_server, tmp_path):
    result = run_qdebug("diff", str(SAMPLE / "red_circle_top_left.png"), "Describe the image.", "--engine", traced_server.url,
                        "--engine-traces", str(tmp_path), "--timeout", "3")
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "no trace of request" in result.stderr and "QDEBUG_VLLM_TRACE_DIR" in result.stderr
    assert "Traceback" not in result.stderr
    alone = run_qdebug("diff", str(SAMPLE / "red_circle_top_left.png"), "Describe the image.", "--engine-traces", str(tmp_path))
    assert alone.returncode == 2 and "needs --engine URL" in alone.stderr and "Traceback" not in alone.stderr


def test_diff_engine_fetches_the_trace_over_http_without_a_shared_folder(traced_server, tmp_path):
    out = tmp_path / "d.json"
    result = run_qdebug("diff", str(SAMPLE / "green_triangle_top_right.png"), "Describe the image.", "--engine", traced_server.url,
                        "--json", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    doc = json.loads(out.read_text())
    assert doc["first_divergence"] is None and doc["b"]["label"].startswith("B vllm")


def test_the_trace_routes_serve_only_the_traces(traced_server):
    import httpx

    index = httpx.get(f"{traced_server.url}/qdebug/traces/index.jsonl", timeout=10)
    assert index.status_code == 200 and '"qdebug_id"' in index.text
    name = json.loads(index.text.splitlines()[0])["trace"]
    got = httpx.get(f"{traced_server.url}/qdebug/traces/{name}", timeout=10)
    assert got.status_code == 200 and got.content[:2] == b"PK"  # the .qdt zip itself
    for bad in ("..%2F..%2Fetc%2Fpasswd", "index.jsonl.qdt", ".hidden.qdt", "nothing.qdt", "%2Fetc%2Fpasswd"):
        assert httpx.get(f"{traced_server.url}/qdebug/traces/{bad}", timeout=10).status_code == 404, bad
