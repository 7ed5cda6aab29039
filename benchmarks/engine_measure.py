"""What the in-server benchmarks (engine.py, engine_watch.py) measure with: bursts sent and timed, CPU per process of a
server, and the plugin's own clocks in words. Shared by both scripts, so neither imports the other's helpers."""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from pathlib import Path

import httpx


async def burst_seconds(url: str, bodies: list[dict], concurrency: int) -> float:
    """Wall seconds to answer every body, `concurrency` at a time (each answer checked)."""
    gate = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=300) as client:
        async def one(body):
            async with gate:
                r = await client.post("/v1/chat/completions", json=body)
                r.raise_for_status()

        start = time.perf_counter()
        await asyncio.gather(*(one(b) for b in bodies))
        return time.perf_counter() - start


def server_cpu(server) -> dict[str, float]:
    """CPU seconds (user + system) each process of a server's process group has used so far, by role: the API server,
    the engine core, the worker(s) (what the others used, e.g. multiprocessing's resource tracker, as "other")."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            comm = Path(entry.path, "comm").read_text().strip()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()  # after "pid (comm)": state ppid pgrp ... utime stime at 12, 13
        if int(fields[2]) != server.proc.pid:
            continue
        role = "worker" if "Worker" in comm else "engine core" if "EngineCor" in comm else "api server" if int(entry.name) == server.proc.pid else "other"
        out[role] = out.get(role, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def cpu_per_request(before: dict[str, float], after: dict[str, float], served: int) -> dict[str, float]:
    """Milliseconds of CPU per request served, by role, between two `server_cpu` readings."""
    return {role: (after[role] - before.get(role, 0.0)) / served * 1e3 for role in after}


def cpu_line(runs: list[dict]) -> str:
    """Median CPU ms per request by role over the runs' readings, and their total."""
    roles = [r for r in ("api server", "engine core", "worker") if any(r in m["cpu"] for m in runs)]
    parts = [f"{role} {statistics.median(m['cpu'].get(role, 0.0) for m in runs):.1f}" for role in roles]
    total = statistics.median(sum(m["cpu"].values()) for m in runs)
    return f"CPU ms per request: {', '.join(parts)}; all {total:.1f} (medians over servers)"


def paired_line(base: list[dict], runs: list[dict]) -> str:
    """Each round's median against the same round's plugin-off median (the servers of a round run minutes apart, not
    hours: less of the machine's drift between them), and the median of those ratios."""
    ratios = [statistics.median(m["rates"]) / statistics.median(b["rates"]) for b, m in zip(base, runs)]
    return f"per-round ratio to off: {', '.join(f'{r:.2f}' for r in ratios)}; median {statistics.median(ratios):.2f}x"


def clock_line(clocks: list[dict], served: int = 0) -> str:
    """The plugin's own time in the worker's steps, summed over servers (engine/plugin_clock.py): how much longer
    those steps ran because of it, measured inside each server, so the load that swings requests/s cancels out."""
    from qdebug.engine.plugin_clock import share

    steps, step, own = (sum(c[k] for c in clocks) for k in ("steps", "step_seconds", "own_seconds"))
    if not steps:
        return "plugin's own time in the worker: not recorded (no clock written)"
    writer = sum(c.get("writer_seconds", 0.0) for c in clocks)
    off_steps = f"; the trace writer's thread {writer / served * 1e3:.1f} ms CPU a request, off the steps" if writer and served else ""
    return (f"plugin's own time in the worker: {own:.2f} s of {step:.2f} s over {int(steps)} steps "
            f"({own / steps * 1e6:.0f} µs a step): the steps ran {share(own, step) * 100:.1f}% longer{off_steps}")


def core_line(cores: list[dict]) -> str:
    """The engine core's cache recording (engine/cache_core.py) against its scheduler's time, summed over servers."""
    own, calls, scheduler, steps = (sum(c[k] for c in cores) for k in ("seconds", "calls", "scheduler_seconds", "scheduler_calls"))
    if not scheduler:
        return "engine core's cache recording: not recorded (no core-<pid>.json written)"
    return (f"engine core's cache recording: {own * 1e3:.1f} ms in {int(calls)} calls of the scheduler's {scheduler:.2f} s "
            f"({int(steps)} calls of schedule, add_request, update_from_output): {own / scheduler * 100:.1f}% of scheduler time")


def in_server_line(clocks: list[dict], cores: list[dict]) -> str:
    """The plugin's cost in requests/s as measured inside the servers: the engine loop taken as serial (the worker's
    steps, then the scheduler), its time without the plugin against its time with it (the worker's share and the
    engine core's recording added); an upper bound where vLLM overlaps scheduling with the steps."""
    step, own = (sum(c[k] for c in clocks) for k in ("step_seconds", "own_seconds"))
    recording, scheduler = (sum(c[k] for c in cores) for k in ("seconds", "scheduler_seconds"))
    if not step:
        return "in-server estimate: not recorded (no clock written)"
    loop = step + scheduler  # with the plugin
    without = loop - own - recording
    return (f"in-server estimate: {without / loop:.3f}x of off (the worker's steps +{own:.2f} s, the engine core +{recording * 1e3:.0f} ms, "
            f"over an engine loop of {loop:.2f} s: steps and scheduler, taken as serial)")
