"""TUI responsiveness: time to first frame (demo model spec; the model loads in a worker) and key → frame latency.

    python benchmarks/tui.py [--runs 7] [--presses 60] [--quick]

First frame: a fresh interpreter per run, measured from just before the process starts (wall clock) to the app's
Ready event (the first frame is on screen), so interpreter start and imports count. The same is measured, in the
same run and alternating with qdebug's, for a minimal Textual app (a Static and a Footer, same terminal size): what
Textual itself costs on this machine now. qdebug's target is a first frame within 1.25× the minimal app's (the
ratio of the medians), whatever the machine's load; the paired ratios (each run over the minimal run after it) are
printed too, as a check on how much the load moved between runs. Step latency: on the saved demo trace, ↓/↑ through
the stage list; each press is timed from the key to the last frame the press produced (every frame is encoded to terminal
bytes as a real terminal would get them); target p95 < 30 ms (2-core machine). The load average is printed with the
figures: other processes on the cores inflate them. The children run with bytecode cached in a temporary folder (one
warm-up run each first), as an installed package has it, whatever PYTHONDONTWRITEBYTECODE says.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "tests" / "data" / "red_circle.qdt"
SIZE = (140, 45)

_CHILD = """
import asyncio, sys, time
from qdebug.model.choice import ModelChoice
from qdebug.tui.app import build_app

async def main():
    app = build_app(model_spec=ModelChoice(model="demo", device="cpu", dtype="auto", attn_kernel="eager"))
    async with app.run_test(size=SIZE) as pilot:
        while app.first_frame_at is None:
            await pilot.pause(0.001)
        first = time.time() - (time.perf_counter() - app.first_frame_at)
        print(first, flush=True)
        app.exit()

asyncio.run(main())
"""

# The yardstick: Textual's own first frame, measured the same way (Ready event, same size, same wait loop).
_MINIMAL_CHILD = """
import asyncio, time
from textual.app import App
from textual.widgets import Footer, Static

class Minimal(App):
    first_frame_at = None

    def compose(self):
        yield Static("minimal Textual app")
        yield Footer()

    def on_ready(self):
        self.first_frame_at = time.perf_counter()

async def main():
    app = Minimal()
    async with app.run_test(size=SIZE) as pilot:
        while app.first_frame_at is None:
            await pilot.pause(0.001)
        first = time.time() - (time.perf_counter() - app.first_frame_at)
        print(first, flush=True)
        app.exit()

asyncio.run(main())
"""


def child_env(pycache: str) -> dict[str, str]:
    """The children's environment: bytecode cached (in `pycache`, outside the tree) as an installed package has it.

    With PYTHONDONTWRITEBYTECODE set (as in some CI shells) an editable checkout recompiles its every module in each
    fresh process while Textual's come precompiled: that would time the compiler, not the first frame."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = pycache
    return env


def first_frame_seconds(child: str, env: dict[str, str]) -> float:
    """One fresh process running `child`: seconds from spawn to its first frame."""
    start = time.time()
    code = f"SIZE = {SIZE!r}\n{child}"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    if out.returncode != 0:
        raise SystemExit(f"first-frame run failed: {out.stderr.strip().splitlines()[-1:]}")
    return float(out.stdout.split()[0]) - start


async def step_latencies(presses: int) -> list[float]:
    """Seconds from each ↓/↑ to the last frame it produced, on the saved trace."""
    from qdebug.trace.schema import load_trace
    from qdebug.tui.app import build_app

    app = build_app(trace=load_trace(TRACE))
    frames: list[float] = []
    display = app._display

    def timed_display(screen, renderable):  # encode each frame like a terminal driver would, and time it
        if renderable is not None:
            renderable.render_segments(app.console) if hasattr(renderable, "render_segments") else None
            frames.append(time.perf_counter())
        display(screen, renderable)

    app._display = timed_display
    out = []
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.screen
        stages = len(screen.doc.trace.stage_names)
        for i in range(presses):
            key = "down" if (i // (stages - 1)) % 2 == 0 else "up"
            before, n = screen.sel.stage, len(frames)
            start = time.perf_counter()
            await pilot.press(key)
            while screen.sel.stage == before or len(frames) == n:
                await pilot.pause(0.001)
            await pilot.pause()
            out.append(frames[-1] - start)
    return out


def main() -> None:
    """Print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--presses", type=int, default=60)
    parser.add_argument("--quick", action="store_true", help="one run, a few presses: checks the benchmark still runs (seconds)")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.presses = 1, 6
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    firsts, minimal = [], []
    with tempfile.TemporaryDirectory(prefix="qdebug-bench-pyc-") as pycache:
        env = child_env(pycache)
        first_frame_seconds(_CHILD, env), first_frame_seconds(_MINIMAL_CHILD, env)  # warm-up: bytecode written, files cached
        for _ in range(args.runs):  # alternating, so that a change of load weighs on both alike
            firsts.append(first_frame_seconds(_CHILD, env))
            minimal.append(first_frame_seconds(_MINIMAL_CHILD, env))
    ours, theirs = statistics.median(firsts), statistics.median(minimal)
    print(f"first frame (demo model spec, process start → first frame): median {ours * 1000:.0f} ms, "
          f"max {max(firsts) * 1000:.0f} ms over {args.runs} runs")
    print(f"first frame of a minimal Textual app (Static + Footer, same size and method): median {theirs * 1000:.0f} ms, "
          f"max {max(minimal) * 1000:.0f} ms over {args.runs} runs")
    print(f"first frame ratio qdebug / minimal Textual app: {ours / theirs:.2f}× (target ≤ 1.25×)")
    # each run over the minimal run beside it: a load that comes and goes weighs on both of a pair alike
    paired = sorted(a / b for a, b in zip(firsts, minimal))
    print(f"paired ratios (each run over the minimal app's run after it): median {statistics.median(paired):.2f}×, "
          f"lowest {paired[0]:.2f}×, highest {paired[-1]:.2f}×")
    lat = sorted(asyncio.run(step_latencies(args.presses)))
    p95 = lat[min(len(lat) - 1, round(0.95 * (len(lat) - 1)))]
    print(f"stage step latency (key → last frame): median {statistics.median(lat) * 1000:.1f} ms, "
          f"p95 {p95 * 1000:.1f} ms, max {lat[-1] * 1000:.1f} ms over {len(lat)} presses (target p95 < 30 ms)")


if __name__ == "__main__":
    main()
