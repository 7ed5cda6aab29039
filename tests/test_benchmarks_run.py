"""Every benchmark still runs: `python benchmarks/X.py --quick` (tiny sizes, seconds) exits 0 and prints its figures.

The figures themselves are never asserted (they depend on the machine). benchmarks/engine.py needs a vLLM
environment and a real server; tests/engine covers that path. benchmarks/trace_writer.py runs vLLM's offline
engine in the vLLM environment (scripts/vllm-env, built before the suite by the README's test command).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
NOT_HERE = {"engine.py", "engine_watch.py"}  # run inside scripts/vllm-env against a vLLM server
SHARED = {"engine_measure.py"}  # the in-server benchmarks' shared helpers: imported by them, not a script
QUICK = sorted(p.name for p in BENCHMARKS.glob("*.py") if p.name not in NOT_HERE | SHARED)


def test_the_benchmarks_are_all_here():
    assert all(p.name in NOT_HERE | SHARED or "__main__" in p.read_text() for p in BENCHMARKS.glob("*.py"))  # every other file runs
    assert {"tui.py", "diff.py", "replay.py", "log_parse.py", "overhead.py", "onnx.py", "endpoint.py", "scale.py"} <= set(QUICK)


@pytest.mark.parametrize("name", QUICK)
def test_benchmark_quick_mode_runs_and_prints_figures(name, tmp_path):
    # Run from an unrelated folder: a benchmark finds its own tree and data, not the caller's working directory.
    result = subprocess.run([sys.executable, str(BENCHMARKS / name), "--quick"], cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    figures = [line for line in result.stdout.splitlines() if re.search(r"\d", line)]
    assert figures, result.stdout  # it printed what it measured
    if name == "tui.py":  # both first frames, measured in the same run, and their ratio
        assert re.search(r"first frame \(demo model spec.*median \d+ ms", result.stdout), result.stdout
        assert re.search(r"first frame of a minimal Textual app.*median \d+ ms", result.stdout), result.stdout
        assert re.search(r"first frame ratio qdebug / minimal Textual app: \d+\.\d\d×", result.stdout), result.stdout
        assert re.search(r"paired ratios .*median \d+\.\d\d×, lowest \d+\.\d\d×, highest \d+\.\d\d×", result.stdout), result.stdout
