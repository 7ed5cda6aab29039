"""The watch against hostile input, inside the vLLM environment (issue 49): counter files that would break vLLM's own
/metrics, a watch that failed to attach, and clients whose request ids are a quarter of a megabyte."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from qdebug.engine.trace_dir import trace_bytes
from qdebug.engine.watch_flight import MAX_FLIGHT_BYTES, MAX_ID_CHARS, MAX_SNAPSHOT_BYTES, MIN_GAP
from qdebug.engine.watch_log import MAX_LINE_BYTES, read_findings

from .client import request_for, send
from .test_watch import CHECKS, VIOLATIONS, logged, settled
from .vllm_server import VllmServer
from .watch_traffic import body_for, distinct_images, send_all

pytestmark = pytest.mark.vllm
HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
HOSTILE = {"inf": '{"dropped": 1e400}', "nan": '{"checks": {"placement": NaN}}', "infinity": '{"seconds": {"counts": Infinity}}',
           "string": '{"violations": {"placement": "7"}}', "huge": '{"errors": {"counts": ' + "9" * 400 + "}}",
           "deep": "[" * 100_000 + "]" * 100_000}


def scrape(vllm_py, folder: Path, run: str) -> dict:
    """The collector scraped from a registry with a series of the server's own, in the vLLM environment."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([str(vllm_py), str(HERE / "watch_scrape.py"), str(folder), run], capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _qdebug_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("qdebug_watch_")]


def test_a_hostile_counter_file_never_breaks_the_servers_metrics(vllm_py, tmp_path):
    """Before, one counter file holding `"dropped": 1e400` made the whole scrape raise (vLLM answered HTTP 400 with
    no vllm: series); now a bad file is skipped, the workers' own files are served, and a folder with none of them
    serves `qdebug_watch_up 0` alone."""
    from qdebug.engine.watch_metrics import WatchCounters

    bad_only = tmp_path / "bad-only"
    bad_only.mkdir()
    (bad_only / "metrics-r1-7.json").write_text(HOSTILE["inf"])  # the repro
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for pid, text in enumerate(HOSTILE.values(), start=10):
        (mixed / f"metrics-r1-{pid}.json").write_text(text)
    worker = WatchCounters(str(mixed), "r1")
    worker.path = str(mixed / "metrics-r1-1.json")
    worker.add("placement", seconds=0.25, violations=1)
    worker.set_dropped(2)
    worker.flush()
    got = scrape(vllm_py, mixed, "r1")
    assert "raised" not in got, got
    text = got["text"]
    assert "vllm:demo_requests_total 1.0" in text and "qdebug_watch_up 1.0" in text, text
    assert 'qdebug_watch_violations_total{check="placement"} 1.0' in text and "qdebug_watch_findings_dropped_total 2.0" in text
    assert not any(re.search(r"inf|nan", line, re.I) for line in _qdebug_lines(text)), _qdebug_lines(text)
    for folder in (bad_only, tmp_path / "no-such-folder", worker.path):  # no worker of the run wrote its counters
        got = scrape(vllm_py, Path(folder), "r1")
        assert "raised" not in got, (folder, got)
        assert "vllm:demo_requests_total 1.0" in got["text"] and _qdebug_lines(got["text"]) == ["qdebug_watch_up 0.0"], got


def test_a_watch_that_failed_to_attach_says_so_on_metrics(vllm_py, tmp_path):
    """QDEBUG_VLLM_WATCH_DIR a regular file: before, /metrics served every qdebug_watch_* series at zero, so `qdebug
    watch URL --once` said "0 violation(s)"; now it serves `qdebug_watch_up 0` and nothing else of the watch's."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a user's file")
    env = {"QDEBUG_VLLM_WATCH": "1", "QDEBUG_VLLM_WATCH_DIR": str(blocker)}
    with VllmServer(vllm_py, tmp_path, extra_env=env) as server:
        assert send(server, request_for("red_circle_top_left.png"), "nowhere").strip() == "a red circle in the top left"
        text = httpx.get(f"{server.url}/metrics", timeout=30).text
        assert "qdebug: not watching this worker" in server.log_text()
    assert _qdebug_lines(text) == ["qdebug_watch_up 0.0"], _qdebug_lines(text)
    assert "vllm:" in text and blocker.read_text() == "a user's file"


def test_clients_with_huge_request_ids_leave_every_watch_file_within_its_bound(vllm_py, tmp_path):
    """The issue's repro: the watch on a shared visual buffer, findings in a 1 MiB log, traces bounded at 1 MiB; first
    ordinary clients, then clients whose `request_id` is 256 KiB. Every findings line, flight-recorder snapshot and the
    trace folder stay within their bounds, the ordinary clients' findings stay in the log, each hostile id is cut
    saying by how much, a bad counter file beside the workers' does not break /metrics, and the server answers."""
    watch = tmp_path / "watch"
    watch.mkdir()
    (watch / "metrics-hostile-999999.json").write_text(HOSTILE["inf"])
    env = {"QDEBUG_VLLM_WATCH": "1", "QDEBUG_VLLM_WATCH_DIR": str(watch), "QDEBUG_VLLM_INJECT": "shared-visual-buffer",
           "QDEBUG_VLLM_WATCH_LOG_MB": "1", "QDEBUG_VLLM_WATCH_TRACE_MB": "1", "QDEBUG_VLLM_WATCH_RUN": "hostile"}
    with VllmServer(vllm_py, tmp_path, extra_env=env) as server:
        server.watch = watch
        ordinary: list = []
        sent = 0
        for attempt in range(3):  # the fault needs two requests' images in one step
            bodies = [body_for(p, 4) for p in distinct_images(tmp_path / "images", 24, seed=attempt)]
            send_all(server, bodies, concurrency=12)
            sent += 24
            series = settled(server, lambda s: s.get((CHECKS, "counts"), 0) >= sent)
            ordinary = logged(server, int(series.get((VIOLATIONS, "placement"), 0)))
            if ordinary:
                break
        assert ordinary, series
        cut: list = []
        snapped: list = []
        for attempt in range(3):
            time.sleep(MIN_GAP)  # the flight recorder may record again: its snapshot then holds the hostile ids
            huge = [f"{attempt}-{i}-" + "x" * (256 << 10) for i in range(24)]
            bodies = [{**body_for(p, 24), "request_id": rid} for p, rid in zip(distinct_images(tmp_path / "images", 24, seed=10 + attempt), huge)]
            send_all(server, bodies, concurrency=12)
            sent += 24
            settled(server, lambda s: s.get((CHECKS, "counts"), 0) >= sent)
            found = read_findings(str(watch))
            cut = [f for f in found if f.request_id.endswith(" chars]")]
            time.sleep(1.0)  # the snapshot is written by a thread of the worker's
            snapped = [p for p in watch.glob("flight-*.json") if json.loads(p.read_text())["request_id"].endswith(" chars]")]
            if cut and snapped:
                break
        metrics = httpx.get(f"{server.url}/metrics", timeout=30)
        answer = send(server, request_for("red_circle_top_left.png"), tagged=False)  # untagged: no trace of the client's
        log_text = server.log_text()
    assert answer.strip() == "a red circle in the top left"
    assert cut and snapped, ([f.request_id[:80] for f in found], [p.name for p in watch.glob("flight-*.json")])
    rid = cut[0].request_id
    kept, _, marker = rid.partition("…")
    assert "chatcmpl-" in kept and re.fullmatch(r"\[\+[0-9]+ chars\]", marker), rid[-40:]
    assert len(kept) + int(marker[2:].split()[0]) >= 256 << 10  # what was kept and what was cut make the whole id
    keys = [(f.time, f.request_id) for f in found]
    assert all((f.time, f.request_id) in keys for f in ordinary)  # no earlier finding rotated away by the hostile ones
    lines = [line for p in watch.glob("findings.log*") for line in p.read_bytes().splitlines()]
    assert lines and max(map(len, lines)) <= MAX_LINE_BYTES
    snaps = list(watch.glob("flight-*.json"))
    ring = json.loads(snapped[0].read_text())
    assert all(len(rid) <= MAX_ID_CHARS + 24 for step in ring["steps"] for rid in step["requests"]), snapped[0].name
    assert snaps and max(p.stat().st_size for p in snaps) <= MAX_SNAPSHOT_BYTES and sum(p.stat().st_size for p in snaps) <= MAX_FLIGHT_BYTES
    assert trace_bytes(watch / "traces") <= 1 << 20, sorted((p.name[:40], p.stat().st_size) for p in (watch / "traces").iterdir())
    assert metrics.status_code == 200 and "vllm:" in metrics.text and "qdebug_watch_up 1.0" in metrics.text
    assert "metrics-hostile-999999.json skipped" in log_text and log_text.count("metrics-hostile-999999.json skipped") == 1
