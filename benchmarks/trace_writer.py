"""What the plugin's trace writer costs per traced request, and where (the thread that assembles and saves each
finished request's trace, off vLLM's steps): vLLM's offline engine in one process on the demo, every request traced,
the writer's CPU per request measured with thread_time; with --profile, where it goes (cProfile, a second pass).

    python benchmarks/trace_writer.py [--requests 40] [--profile]
    python benchmarks/trace_writer.py --quick    # 3 requests: checks the script runs, measures little

Needs the vLLM environment (`scripts/vllm-env`, or QDEBUG_VLLM_PYTHON); this script re-runs itself there.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

IN_PROCESS = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}  # the worker in this process: its writer thread is patched here


def measure(requests: int, profile: bool, folder: str) -> None:
    """Inside the vLLM environment: serve `requests` traced image requests one by one; print the writer's figures."""
    import cProfile
    import io
    import pstats
    import statistics
    import time

    from PIL import Image
    from vllm import LLM, SamplingParams

    from qdebug.engine import vllm_tracer

    profiler = cProfile.Profile(time.thread_time) if profile else None  # CPU time: the GIL waits behind the steps are not the writer's cost
    seconds: list[float] = []

    def run(self: vllm_tracer.TraceWriter) -> None:  # the writer's loop, timed per request (and profiled)
        while (item := self.queue.get()) is not None:
            req, generated, _limit = item  # TraceWriter.submit's (request, ids, the watch's byte bound)
            start = time.thread_time()
            if profiler is not None:
                profiler.enable()
            trace, line = self.assemble(req, generated)
            self.trace_dir.write(trace, req.name, line)
            if profiler is not None:
                profiler.disable()
            seconds.append(time.thread_time() - start)

    setattr(vllm_tracer.TraceWriter, "_run", run)
    llm = LLM(model=str(REPO / "qdebug" / "demo" / "checkpoint"), enforce_eager=True, max_model_len=1024, dtype="float32")
    image = Image.open(REPO / "sample_data" / "red_circle_top_left.png").convert("RGB")
    chat = [{"role": "user", "content": [{"type": "image_pil", "image_pil": image}, {"type": "text", "text": "Describe the image."}]}]
    params = SamplingParams(temperature=0, max_tokens=16, extra_args={"qdebug_trace": True})
    for _ in range(requests + 1):  # the first warms up (tokenizer load): not counted
        llm.chat([chat], params)
    seen, quiet = -1, 0
    while quiet < 20 and len(seconds) < requests:  # the last request's trace is written at the worker's exit: not timed
        quiet = quiet + 1 if len(seconds) == seen else 0
        seen = len(seconds)
        time.sleep(0.1)
    kept = seconds[1:]
    sizes = [f.stat().st_size for f in Path(folder).glob("*.qdt")]
    print(f"trace writer, demo on vLLM 0.32 CPU build, {requests + 1} image requests of 16 tokens sent one by one, "
          f"{len(seconds)} traces timed (the first left out: it loads the tokenizer; the last is written at exit)"
          f"{' (under cProfile)' if profile else ''}: CPU per request median {statistics.median(kept) * 1e3:.1f} ms, "
          f"range {min(kept) * 1e3:.1f}..{max(kept) * 1e3:.1f} ms; {statistics.median(sizes) / 1024:.0f} KiB a trace")
    if profiler is not None:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(30)
        print(out.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--profile", action="store_true", help="also where the time goes (cProfile: slows the writer)")
    parser.add_argument("--quick", action="store_true", help="3 requests: checks the script runs, measures little")
    parser.add_argument("--inside", help=argparse.SUPPRESS)  # the trace folder, when run in the vLLM environment
    args = parser.parse_args()
    if args.quick:
        args.requests = 3
    if args.inside:
        measure(args.requests, args.profile, args.inside)
        return
    from tests.engine.vllm_server import ENGINE_ENV, vllm_python

    python = vllm_python()
    if python is None:
        sys.exit("benchmarks/trace_writer.py: no vLLM environment (run scripts/vllm-env, or set QDEBUG_VLLM_PYTHON)")
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, **ENGINE_ENV, **IN_PROCESS, "QDEBUG_VLLM_TRACE_DIR": tmp,
               "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)}
        command = [str(python), __file__, "--requests", str(args.requests), "--inside", tmp] + (["--profile"] if args.profile else [])
        done = subprocess.run(command, env=env, cwd=tmp, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"benchmarks/trace_writer.py: the vLLM run failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
        out = done.stdout
        print(out[out.find("trace writer, "):], end="")  # vLLM's own log lines come first: left out


if __name__ == "__main__":
    main()
