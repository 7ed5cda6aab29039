"""Overhead of a fully traced request vs a plain `generate` (same model, dtype, eager kernel), and trace size.

Usage: python benchmarks/overhead.py [--model demo] [--device cpu] [--requests 20] [--quick]
Prints median seconds of each, their ratio (measured interleaved in one run), and the saved trace size.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this tree's qdebug, wherever it is run from


def main() -> None:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="demo")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--max-new-tokens", type=int, default=12)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, seconds: checks the benchmark still runs (figures mean little)")
    args = parser.parse_args()
    if args.quick:
        args.requests, args.max_new_tokens = 2, 3

    from qdebug.commands.common import quiet_transformers
    from qdebug.demo.scenes import make_scene
    from qdebug.model.load import load_model
    from qdebug.trace.request import build_request
    from qdebug.trace.runner import prepare, run_generate, trace_request
    from qdebug.trace.schema import trace_bytes

    quiet_transformers()
    plain = load_model(args.model, args.device, args.dtype, attn_implementation="eager")
    traced = load_model(args.model, args.device, args.dtype, "eager")
    rng = random.Random(0)
    requests = [
        build_request("Describe the image.", [], images=[make_scene(rng).image], max_new_tokens=args.max_new_tokens)
        for _ in range(args.requests)
    ]
    # Warm up both paths once.
    run_generate(plain, prepare(plain, requests[0]).inputs, args.max_new_tokens)
    trace_request(traced, requests[0])

    t_plain, t_traced, sizes = [], [], []
    for req in requests:  # interleaved so drift on a noisy machine hits both equally
        start = time.perf_counter()
        run_generate(plain, prepare(plain, req).inputs, args.max_new_tokens)
        t_plain.append(time.perf_counter() - start)
        start = time.perf_counter()
        trace = trace_request(traced, req)
        t_traced.append(time.perf_counter() - start)
        sizes.append(trace_bytes(trace))
    p, t = statistics.median(t_plain), statistics.median(t_traced)
    print(f"model {args.model} on {plain.device} ({plain.dtype}), {args.requests} requests, max_new_tokens {args.max_new_tokens}")
    print(f"plain generate (eager):   median {p * 1000:.1f} ms")
    print(f"fully traced request:     median {t * 1000:.1f} ms")
    print(f"overhead ratio traced/plain: {t / p:.2f}x  (target <= 1.3x)")
    print(f"trace size: median {statistics.median(sizes) / 1024:.1f} KiB, max {max(sizes) / 1024:.1f} KiB")


if __name__ == "__main__":
    main()
