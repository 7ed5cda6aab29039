"""ONNX benchmark: export time of the demo model, and onnxruntime prefill vs PyTorch prefill on the same request.

Usage: python benchmarks/onnx.py [--repeats 20] [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# This file is named onnx.py: drop its own folder from the path so `import onnx` finds the package, not this script.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))


def main() -> None:
    """Print the export time and median prefill timings (vision + LM prefill) of both runtimes, measured interleaved."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1, help="CPU threads for both runtimes (the same count, so the ratio is fair).")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, seconds: checks the benchmark still runs (figures mean little)")
    args = parser.parse_args()
    if args.quick:  # the export itself cannot shrink: it is the demo model's
        args.repeats = 1

    import torch

    torch.set_num_threads(args.threads)
    from qdebug.commands.common import quiet_transformers
    from qdebug.export.build import export_onnx
    from qdebug.export.inject import Injects
    from qdebug.export.manifest import find_manifest
    from qdebug.export.ort_run import open_export, run_export
    from qdebug.model.load import load_model
    from qdebug.trace.request import build_request, load_image
    from qdebug.trace.runner import prepare

    quiet_transformers()
    loaded = load_model("demo", "cpu", "float32", attn_implementation="eager")
    image = ROOT / "sample_data" / "blue_square_bottom_right.png"
    inputs = prepare(loaded, build_request("Describe the image.", [image], images=[load_image(image)], max_new_tokens=1)).inputs
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        export_onnx(loaded, Path(tmp) / "demo", Injects([]))
        exported = time.perf_counter() - start
        opened = open_export(find_manifest(Path(tmp) / "demo"), loaded, "cpu", threads=args.threads)
        run_export(opened, loaded, inputs)  # warm-up
        ort_times, torch_times = [], []
        with torch.inference_mode():
            loaded.model(**inputs)
            for _ in range(args.repeats):
                start = time.perf_counter()
                loaded.model(**inputs)  # one prefill forward: vision, merge, decoder, lm_head
                torch_times.append(time.perf_counter() - start)
                start = time.perf_counter()
                run_export(opened, loaded, inputs)  # vision graph, merge, prefill graph (every layer's output returned)
                ort_times.append(time.perf_counter() - start)
    t, o = statistics.median(torch_times), statistics.median(ort_times)
    print(f"export (vision + prefill graphs, manifest): {exported:.1f} s")
    print(f"PyTorch prefill: median {t * 1000:.1f} ms ({inputs['input_ids'].shape[1]} tokens, {torch.get_num_threads()} threads)")
    print(f"onnxruntime prefill ({opened.provider}, {args.threads} threads): median {o * 1000:.1f} ms = {o / t:.2f}x PyTorch")


if __name__ == "__main__":
    main()
