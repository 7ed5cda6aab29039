"""What qdebug's watch mode costs inside vLLM: requests/s of vLLM on the demo with the plugin off against
QDEBUG_VLLM_WATCH=1 (default sample 0.01, or --sample), in the same rounds, on the same requests; and what each check
costs, from the server's own qdebug_watch_check_seconds_total / qdebug_watch_checks_total.

    python benchmarks/engine_watch.py [--requests 64] [--concurrency 8] [--bursts 5] [--rounds 2] [--sample 0.01]
                                      [--block-size 32] [--repeat 0.5]
    python benchmarks/engine_watch.py --quick      # 8 requests, 4 at a time, 1 burst, 1 round: checks the script runs

Every request carries an image of its own (random pixels), but for a share of each burst (`--repeat`, default 0.5)
that resend the image before them: no burst is served an earlier one's encodings, and within a burst the repeats are
read from vLLM's caches (KV blocks of `--block-size`, default 32), so the `cache` check judges reads on every
request that makes them (its reads are printed by cache and what was served). On 2
shared cores a server's throughput swings by 2x from burst to burst: each setting reports the median of its bursts
and their range, and the settings alternate in rounds (off, watch; watch, off; again); each round's watch rate is also
put against the same round's off rate, and each server's CPU per request served is printed (benchmarks/engine.py says
what it is worth), and the plugin's own time in the worker's steps from the server's own clock series (a ratio within
one server, which the load swings cancel out of), with the engine core's cache recording against its scheduler's time
(`core-<pid>.json` in the watch's trace folder). The goal (issues 34, 48): watch on, the cache check on every
request, ≤ 1.03× off.

Needs the vLLM environment (`scripts/vllm-env`, or QDEBUG_VLLM_PYTHON).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path


REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.engine.vllm_server import VllmServer, vllm_python  # noqa: E402
from tests.engine.watch_traffic import body_for, distinct_images, watch_series  # noqa: E402

from engine_measure import burst_seconds, clock_line, core_line, cpu_line, cpu_per_request, in_server_line, paired_line, server_cpu  # noqa: E402  (beside this script)


def _measure(python, work: Path, watch: bool, sample: float, bursts: list[list[dict]], concurrency: int, block_size: int) -> dict:
    from qdebug.engine.cache_core import read_core

    folder = work / f"watch-{time.monotonic_ns()}"
    env = {"QDEBUG_VLLM_WATCH": "1", "QDEBUG_VLLM_WATCH_SAMPLE": str(sample), "QDEBUG_VLLM_WATCH_DIR": str(folder)} if watch else {}
    with VllmServer(python, work, extra_env=env, extra_args=("--block-size", str(block_size))) as server:
        asyncio.run(burst_seconds(server.url, bursts[0][: concurrency * 2], concurrency))  # warm-up, not counted
        before = server_cpu(server)
        rates = sorted(len(b) / asyncio.run(burst_seconds(server.url, b, concurrency)) for b in bursts[1:])
        cpu = cpu_per_request(before, server_cpu(server), sum(len(b) for b in bursts[1:]))
        time.sleep(1.5)  # the worker writes its counters twice a second, the engine core its clock once a second
        series = watch_series(server) if watch else {}
    core = read_core(str(folder / "traces")) if watch else None  # the watch's trace folder (watch_engine.prepare_process)
    return {"rates": rates, "cpu": cpu, "series": series, "core": core}


def _bursts(work: Path, requests: int, bursts: int, repeat: float) -> list[list[dict]]:
    """`bursts` + 1 bursts of `requests` chat bodies, each of its own random image but for the `repeat` share that
    resend the image before them (the first burst warms the server up)."""
    out = []
    for k in range(bursts + 1):
        paths = distinct_images(work / "images", requests, seed=k)
        sent: list[Path] = []
        for i, path in enumerate(paths):
            sent.append(sent[-1] if i and int((i + 1) * repeat) > int(i * repeat) else path)
        out.append([body_for(p, 16) for p in sent])
    return out


def _clock(series: dict) -> dict[str, float]:
    """The worker clock's series of one watched server (engine/plugin_clock.py)."""
    return {key: series.get((f"qdebug_watch_{name}_total", ""), 0.0)
            for key, name in (("steps", "worker_steps"), ("step_seconds", "worker_step_seconds"), ("own_seconds", "plugin_seconds"))}


def run(args: argparse.Namespace) -> None:
    """Off against watch on, alternating in rounds; print the ratio in requests/s and each check's cost."""
    python = vllm_python()
    if python is None:
        sys.exit("benchmarks: no vLLM environment (run scripts/vllm-env, or set QDEBUG_VLLM_PYTHON)")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        bursts = _bursts(work, args.requests, args.bursts, args.repeat)
        runs: dict[str, list] = {"off": [], "watch": []}
        for k in range(args.rounds):
            for name in ("off", "watch") if k % 2 == 0 else ("watch", "off"):  # ABBA: neither always runs first
                runs[name].append(_measure(python, work, name == "watch", args.sample, bursts, args.concurrency, args.block_size))
    median = statistics.median
    base = median([r for m in runs["off"] for r in m["rates"]])
    print(f"vLLM 0.32 CPU build, demo checkpoint float32, {args.requests} image requests ({args.concurrency} at a time, "
          f"{args.repeat:.0%} resending the image before), block size {args.block_size}, {args.bursts} bursts per server, "
          f"{args.rounds} rounds, watch sample {args.sample}")
    for name, label in (("off", "off"), ("watch", f"watch on (sample {args.sample})")):
        rates = [r for m in runs[name] for r in m["rates"]]
        per_round = ", ".join(f"{median(m['rates']):.1f}" for m in runs[name])
        print(f"  {label:<26} median {median(rates):6.1f} requests/s ({median(rates) / base:.3f}x off; per round {per_round}; "
              f"range {min(rates):.1f}..{max(rates):.1f})")
        if name == "watch":
            print(f"  {'':<26} {paired_line(runs['off'], runs[name])}")
            print(f"  {'':<26} {clock_line([_clock(m['series']) for m in runs[name]])}")
            print(f"  {'':<26} {core_line([m['core'] for m in runs[name] if m['core']])}")
            print(f"  {'':<26} {in_server_line([_clock(m['series']) for m in runs[name]], [m['core'] for m in runs[name] if m['core']])}")
        print(f"  {'':<26} {cpu_line(runs[name])}")
    totals: dict[str, list[float]] = {}
    for m in runs["watch"]:
        for (series, check), value in m["series"].items():
            totals.setdefault(f"{series}/{check}", []).append(value)
    served = args.concurrency * 2 + args.requests * args.bursts
    from qdebug.vocab import WATCH_CHECKS

    for check in WATCH_CHECKS:
        checks = sum(totals.get(f"qdebug_watch_checks_total/{check}", [0]))
        seconds = sum(totals.get(f"qdebug_watch_check_seconds_total/{check}", [0]))
        if checks:
            print(f"  {check:<13} {int(checks):>7} checks, {seconds / checks * 1e6:8.1f} µs each, "
                  f"{seconds / (served * args.rounds) * 1e3:.3f} ms per request served")
    reads = {key.split("/", 1)[1]: sum(v) for key, v in totals.items() if key.startswith("qdebug_watch_cache_reads_total/") and sum(v)}
    print(f"  cache reads judged: {', '.join(f'{k} {int(v)}' for k, v in sorted(reads.items())) or 'none'}")


def main() -> None:
    """`python benchmarks/engine_watch.py`: the same as `python benchmarks/engine.py --watch`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--bursts", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--sample", type=float, default=0.01, help="QDEBUG_VLLM_WATCH_SAMPLE of the watched server")
    parser.add_argument("--quick", action="store_true", help="8 requests, 4 at a time, 1 burst, 1 round: checks the script, measures little")
    parser.add_argument("--block-size", type=int, default=32, help="every server's KV block size")
    parser.add_argument("--repeat", type=float, default=0.5, help="the share of a burst's requests that resend the image before them")
    args = parser.parse_args()
    if args.quick:
        args.requests, args.concurrency, args.bursts, args.rounds = 8, 4, 1, 1
    run(args)


if __name__ == "__main__":
    main()
