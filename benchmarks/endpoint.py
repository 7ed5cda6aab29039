"""Endpoint replay benchmark: requests/s that `replay --endpoint` sustains against `qdebug serve` on the demo, and
the client's own cost per request, measured against that server and against a null server that answers at once.

Usage: python benchmarks/endpoint.py [--requests 32] [--concurrency 8] [--repeat 2] [--quick]
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(cmd: list[str], port: int) -> subprocess.Popen:
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2).status_code == 200:
                return proc
        except httpx.TransportError:
            time.sleep(0.3)
    proc.kill()
    raise SystemExit(f"server on port {port} did not start: {' '.join(cmd)}")


def _null_server(port: int) -> None:
    """An OpenAI-compatible server that answers every chat request at once with a fixed text."""
    import uvicorn
    from fastapi import FastAPI

    app = FastAPI()

    @app.get("/v1/models")
    async def models() -> dict:
        return {"object": "list", "data": [{"id": "null", "object": "model"}]}

    @app.post("/v1/chat/completions")
    async def chat(body: dict) -> dict:
        return {"id": "n", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]}

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def _burst(n: int):
    """A Batch of n demo scene requests built in memory."""
    from qdebug.demo.scenes import PROMPTS, make_scene
    from qdebug.replay.batch import Batch, BatchRequest
    from qdebug.trace.request import build_request

    rng = random.Random(7)
    batch = Batch(source="<benchmark>", kind="capture")
    for i in range(n):
        request = build_request(rng.choice(PROMPTS), [], images=[make_scene(rng).image], max_new_tokens=12, request_id=str(i))
        batch.requests.append(BatchRequest(request_id=str(i), request=request, arrival_ts=i * 0.001))
    return batch


def _measure(label: str, url: str, batch, concurrency: int, repeat: int) -> None:
    from qdebug.replay.endpoint import EndpointSettings, run_endpoint

    run = run_endpoint(batch, EndpointSettings(url, concurrency=concurrency, repeat=repeat, timeout=600))
    n = len(batch.requests)
    burst_s = sum(run.burst_seconds)
    errors = sum(1 for b in run.bursts for a in b.values() if a.error)
    latency = sorted(a.seconds for b in run.bursts for a in b.values())
    print(f"{label}: {n * repeat} burst requests at concurrency {concurrency} in {burst_s:.2f} s = {n * repeat / burst_s:.1f} requests/s"
          f" (median latency {latency[len(latency) // 2] * 1000:.0f} ms, errors {errors});"
          f" client CPU {run.client_cpu_s / run.sent * 1000:.2f} ms per request over {run.sent} requests")


def main() -> None:
    """Start the servers, replay the same burst against each, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--null-server", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, seconds: checks the benchmark still runs (figures mean little)")
    args = parser.parse_args()
    if args.quick:
        args.requests, args.concurrency, args.repeat = 3, 2, 1
    if args.null_server:
        _null_server(args.null_server)
        return
    batch = _burst(args.requests)
    servers = []
    try:
        null_port = _port()
        servers.append(_start([sys.executable, __file__, "--null-server", str(null_port)], null_port))
        port = _port()
        servers.append(_start([sys.executable, "-m", "qdebug", "serve", "--port", str(port), "--device", "cpu"], port))
        _measure("null server (client alone)", f"http://127.0.0.1:{null_port}", batch, args.concurrency, args.repeat)
        _measure("qdebug serve, demo, cpu", f"http://127.0.0.1:{port}", batch, args.concurrency, args.repeat)
    finally:
        for proc in servers:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    main()
