"""Diff benchmark: a `--vary paths` diff relative to two plain traced runs, and the size of its two traces.

Usage: python benchmarks/diff.py [--repeats 10] [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    """Print median timings of both and their ratio, measured interleaved in one run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, seconds: checks the benchmark still runs (figures mean little)")
    args = parser.parse_args()
    tokens = 16
    if args.quick:
        args.repeats, tokens = 1, 3

    from qdebug.analysis.diff import diff_traces
    from qdebug.commands.common import quiet_transformers
    from qdebug.commands.diff import DiffArgs, run_diff
    from qdebug.model.load import load_model
    from qdebug.trace.request import build_request, load_image
    from qdebug.trace.runner import RecordPolicy, trace_request
    from qdebug.trace.schema import trace_bytes

    quiet_transformers()
    image = ROOT / "sample_data" / "blue_square_bottom_right.png"
    loaded = load_model("demo", args.device)
    request = build_request("Describe the image.", [image], images=[load_image(image)], max_new_tokens=tokens)
    diff_args = DiffArgs(str(image), "Describe the image.", vary="paths", device=args.device, max_new_tokens=tokens)
    models: dict = {}
    run_diff(diff_args, models)  # warm-up; loads the model once into `models`
    plain, diffs, compare = [], [], []
    for _ in range(args.repeats):
        start = time.perf_counter()
        trace_request(loaded, request, RecordPolicy())
        trace_request(loaded, request, RecordPolicy())
        plain.append(time.perf_counter() - start)
        start = time.perf_counter()
        (comparison,) = run_diff(diff_args, models).comparisons  # a DiffRun: one Comparison for one order
        a, b = comparison.trace_a, comparison.trace_b
        diffs.append(time.perf_counter() - start)
        start = time.perf_counter()
        diff_traces(a, b)
        compare.append(time.perf_counter() - start)
    p, d, c = statistics.median(plain), statistics.median(diffs), statistics.median(compare)
    print(f"two plain traced runs: median {p * 1000:.1f} ms")
    print(f"diff --vary paths (both runs + comparison, model loaded): median {d * 1000:.1f} ms = {d / p:.2f}x")
    print(f"the comparison alone (diff_traces): median {c * 1000:.2f} ms = {c / p:.1%} of the two runs")
    print(f"trace sizes: A {trace_bytes(a) / 1024:.1f} KiB, B {trace_bytes(b) / 1024:.1f} KiB")


if __name__ == "__main__":
    main()
