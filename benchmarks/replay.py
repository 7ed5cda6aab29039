"""Replay benchmark: runtime-log parse rate and memory, and a 64-request replay in threads and batched mode
relative to 64 isolated runs, all measured in one run.

Usage: python benchmarks/replay.py [--lines 1000000] [--requests 64] [--concurrency 8] [--quick]
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _log_parse():
    spec = importlib.util.spec_from_file_location("log_parse", Path(__file__).with_name("log_parse.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _burst(n: int):
    """A Batch of n scene requests (several sizes), built in memory."""
    from qdebug.demo.scenes import PROMPTS, make_scene
    from qdebug.replay.batch import Batch, BatchRequest
    from qdebug.trace.request import build_request

    rng = random.Random(64)
    batch = Batch(source="<benchmark>", kind="capture")
    for i in range(n):
        request = build_request(rng.choice(PROMPTS), [], images=[make_scene(rng).image], max_new_tokens=12, request_id=str(i))
        batch.requests.append(BatchRequest(request_id=str(i), request=request))
    return batch


def main() -> None:
    """Print parse figures, then replay timings."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, seconds: checks the benchmark still runs (figures mean little)")
    args = parser.parse_args()
    if args.quick:
        args.lines, args.requests, args.concurrency = 20_000, 3, 2

    log_parse = _log_parse()
    with tempfile.TemporaryDirectory() as tmp:
        path = log_parse.generate_log(Path(tmp) / "burst.log", args.lines)
        m = log_parse.qdebug_run(path, str(Path(tmp) / "cache"))  # a fresh process: its own peak RSS
    print(f"runtime log: {m['lines']:,} lines parsed and indexed at {m['lines'] / m['seconds']:,.0f} lines/s; "
          f"peak memory {m['maxrss_mb']:.0f} MiB (RSS of the indexing process)")

    from qdebug.commands.common import quiet_transformers
    from qdebug.model.load import load_model
    from qdebug.replay.engine import ReplaySettings, replay
    from qdebug.trace.runner import RecordPolicy, trace_request

    quiet_transformers()
    loaded = load_model("demo", args.device)
    batch = _burst(args.requests)
    trace_request(loaded, batch.requests[0].request)  # warm-up

    start = time.perf_counter()
    references = {r.request_id: trace_request(loaded, r.request, RecordPolicy(attn_layers=None)) for r in batch.requests}
    isolated = time.perf_counter() - start

    timings = {}
    for mode in ("threads", "batched"):
        start = time.perf_counter()
        replay(loaded, batch, ReplaySettings(mode=mode, concurrency=args.concurrency), references=references)
        timings[mode] = time.perf_counter() - start
    print(f"{args.requests} isolated traced runs: {isolated:.2f} s")
    for mode, seconds in timings.items():
        extra = f" (concurrency {args.concurrency})" if mode == "threads" else ""
        print(f"replay phase, {mode}{extra}: {seconds:.2f} s = {seconds / isolated:.2f}x the isolated runs")


if __name__ == "__main__":
    main()
