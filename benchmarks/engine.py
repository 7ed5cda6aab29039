"""What qdebug's vLLM plugin costs: requests/s of vLLM on the demo with the plugin off, on with no request tagged, and
tracing every request; the trace bytes per request. One server per setting and round, the same requests, in one run.
With the plugin on, its batch log (batches.jsonl: every step's requests and every encoder call's items) is always
written; its bytes per request are reported too.

    python benchmarks/engine.py [--requests 64] [--concurrency 8] [--bursts 5] [--rounds 2] [--block-size 32] [--repeat 0.5]
    python benchmarks/engine.py --quick      # 8 requests, 4 at a time, 1 burst, 1 round: checks the script runs
    python benchmarks/engine.py --watch [--sample 0.01]   # watch mode (QDEBUG_VLLM_WATCH=1) against off, interleaved
                                                          # rounds, and each check's cost (benchmarks/engine_watch.py)

Every burst sends requests no earlier burst sent (its own prompt suffix and image uuid), as a serving engine sees
them: no setting is served an earlier burst's prefix-cache blocks or encodings. Within a burst, a share of the
requests (`--repeat`, default 0.5) resend the request before them (the same image and prompt), at a KV block size
(`--block-size`, default 32) small enough for a prompt's blocks to fill: vLLM serves them from its caches, and the
plugin's cache provenance (engine/cache_core.py in the engine core, engine/cache_witness.py in the worker) records
and judges every read, as it does in production. The engine core's recording time is printed against its
scheduler's (`core-<pid>.json` in the trace folder).

On 2 shared cores a vLLM server's throughput swings by 2x from burst to burst (API server, engine core, worker
and client share them), so each setting reports the median of its bursts and their range, and the settings are
run in rounds (off, none tagged, all; then all, none tagged, off; again), so that drift over the run shows as a
difference between rounds and no setting always runs first; each setting's rate is also put against the same
round's plugin-off rate. Each setting reports the CPU its server's processes used per request served (API server,
engine core, worker; from /proc): a second opinion, not a clean one, as vLLM's engine core and worker poll while they
wait, so their CPU grows with the wall time a slowed-down server takes too. The finest figure is the third: the
plugin's own time inside the worker's steps against the steps' time, from the clock each worker writes into the trace
folder (`clock-<pid>.json`, engine/plugin_clock.py), a ratio measured within one server.

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

from engine_measure import burst_seconds, clock_line, core_line, cpu_line, cpu_per_request, in_server_line, paired_line, server_cpu  # noqa: E402  (beside this script)

IMAGES = ["red_circle_top_left.png", "blue_square_bottom_right.png", "green_triangle_top_right.png",
          "yellow_circle_bottom_left.png", "red_triangle_bottom_right.png", "blue_circle_top_right.png"]
SETTINGS = [("off", {}), ("on, none tagged", {"trace_dir": True}), ("tracing every request", {"trace_dir": True, "trace_all": True})]


SERVER_ARGS: list[str] = []  # every server's extra arguments (main sets --block-size)
REPEAT = 0.5  # the share of a burst's requests that resend the request before them (main sets --repeat)


def _bodies(n: int, burst: int, tagged: bool = False) -> list[dict]:
    """Burst `burst`'s requests: a prompt and an image identity (vLLM's `uuid`) of their own, but for the REPEAT share
    that resend the one before them (read from vLLM's caches); `tagged`: each asks the plugin for its trace
    (`vllm_xargs.qdebug_trace`, under a name of its own), as a client tags the requests it wants traced."""
    from qdebug.replay.endpoint import chat_body
    from qdebug.trace.request import build_request, load_image

    out: list[dict] = []
    sources: list[int] = []  # whose image and prompt each request sends
    for i in range(n):
        sources.append(sources[-1] if i and int((i + 1) * REPEAT) > int(i * REPEAT) else i)
        k = sources[-1]
        path = str(REPO / "sample_data" / IMAGES[k % len(IMAGES)])
        request = build_request(f"Describe the image. {burst}-{k}", [path], images=[load_image(path)], max_new_tokens=16)
        body = chat_body(request, "demo", top_logprobs=0)
        for message in body["messages"]:
            message["content"] = [{**part, "uuid": f"bench-{burst}-{k}"} if part.get("type") == "image_url" else part
                                  for part in message["content"]]
        if tagged:
            body["vllm_xargs"] = {"qdebug_trace": True, "qdebug_id": f"bench-{burst}-{i}"}
        out.append(body)
    return out







def _measure(python, work: Path, name: str, options: dict, bursts: list[list[dict]], concurrency: int) -> dict:
    traces = work / f"{name.replace(' ', '-').replace(',', '')}-{time.monotonic_ns()}" / "traces" if options.get("trace_dir") else None
    with VllmServer(python, work, trace_dir=traces, trace_all=options.get("trace_all", False), extra_args=tuple(SERVER_ARGS)) as server:
        asyncio.run(burst_seconds(server.url, bursts[0][: concurrency * 2], concurrency))  # warm-up, not counted
        before = server_cpu(server)
        rates = sorted(len(b) / asyncio.run(burst_seconds(server.url, b, concurrency)) for b in bursts[1:])
        cpu = cpu_per_request(before, server_cpu(server), sum(len(b) for b in bursts[1:]))
        time.sleep(1.0)  # the writer thread finishes the last traces
    files = sorted(traces.glob("*.qdt")) if traces is not None else []
    served = concurrency * 2 + sum(len(b) for b in bursts[1:])
    log = traces / "batches.jsonl" if traces is not None else None
    from qdebug.engine.cache_core import read_core
    from qdebug.engine.plugin_clock import read_clocks

    return {"name": name, "rates": rates, "cpu": cpu, "bytes": sum(f.stat().st_size for f in files) / len(files) if files else 0,
            "log_bytes": log.stat().st_size / served if log is not None and log.exists() else 0,
            "clock": read_clocks(str(traces)) if traces is not None else None,
            "core": read_core(str(traces)) if traces is not None else None}


def alternating_ratios(python, work: Path, requests: int, concurrency: int, pairs: int) -> list[float]:
    """One plugin-on server, bursts with every request tagged and bursts with none tagged in turn (the order flips each
    pair): each pair's tagged rate over its untagged rate. Both kinds of burst run on the same server, so the 2x swing
    between servers on 2 shared cores is not in the ratio. A tagged burst counts as done once its last trace is in
    the index (the writer's work is charged to it, not to the burst after it)."""
    traces = work / f"alternating-{time.monotonic_ns()}" / "traces"
    ratios = []
    with VllmServer(python, work, trace_dir=traces, extra_args=tuple(SERVER_ARGS)) as server:
        for tagged in (False, True):  # warm-up, not counted
            asyncio.run(burst_seconds(server.url, _bodies(concurrency * 2, 9000 + tagged, tagged), concurrency))
        written = _traces_indexed(traces, concurrency * 2, 60.0)  # the warm-up's traces are not charged to the first pair
        for k in range(pairs):
            rates = {}
            for tagged in ((False, True) if k % 2 == 0 else (True, False)):
                start = time.perf_counter()
                asyncio.run(burst_seconds(server.url, _bodies(requests, 10_000 + 2 * k + tagged, tagged), concurrency))
                if tagged:
                    written = _traces_indexed(traces, written + requests, 60.0)
                rates[tagged] = requests / (time.perf_counter() - start)
            ratios.append(rates[True] / rates[False])
    return ratios


def _traces_indexed(traces: Path, expected: int, limit: float) -> int:
    """Wait (at most `limit` s) until the trace folder's index names `expected` traces; how many it names."""
    index = traces / "index.jsonl"
    deadline = time.perf_counter() + limit
    while True:
        count = index.read_bytes().count(b"\n") if index.exists() else 0
        if count >= expected or time.perf_counter() > deadline:
            return count
        time.sleep(0.005)




def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--bursts", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pairs", type=int, default=8, help="tagged/untagged burst pairs per server of the in-server comparison")
    parser.add_argument("--quick", action="store_true", help="8 requests, 4 at a time, 1 burst, 1 round: checks the script, measures little")
    parser.add_argument("--watch", action="store_true", help="measure watch mode against off instead (benchmarks/engine_watch.py)")
    parser.add_argument("--sample", type=float, default=0.01, help="with --watch: QDEBUG_VLLM_WATCH_SAMPLE of the watched server")
    parser.add_argument("--block-size", type=int, default=32, help="every server's KV block size (vLLM's CPU default, 128, fills no "
                        "block of the demo's prompts: no prefix-cache read)")
    parser.add_argument("--repeat", type=float, default=0.5, help="the share of a burst's requests that resend the request before them "
                        "(read from vLLM's caches)")
    args = parser.parse_args()
    global REPEAT
    SERVER_ARGS[:] = ["--block-size", str(args.block_size)]
    REPEAT = args.repeat
    if args.quick:
        args.requests, args.concurrency, args.bursts, args.rounds, args.pairs = 8, 4, 1, 1, 1
    if args.watch:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from engine_watch import run as run_watch  # beside this script (it shares engine_measure.py, never imports this one)

        run_watch(args)
        return
    python = vllm_python()
    if python is None:
        sys.exit("benchmarks/engine.py: no vLLM environment (run scripts/vllm-env, or set QDEBUG_VLLM_PYTHON)")
    bursts = [_bodies(args.requests, k) for k in range(args.bursts + 1)]  # burst 0 warms the server up
    rows: dict[str, list] = {name: [] for name, _ in SETTINGS}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.rounds):
            for name, options in SETTINGS if k % 2 == 0 else SETTINGS[::-1]:  # ABBA: no setting always runs first
                rows[name].append(_measure(python, Path(tmp), name, options, bursts, args.concurrency))
        alternating = [r for _ in range(args.rounds) for r in alternating_ratios(python, Path(tmp), args.requests, args.concurrency, args.pairs)]
    median = lambda xs: statistics.median(xs)
    base = median([r for m in rows["off"] for r in m["rates"]])
    print(f"vLLM 0.32 CPU build, demo checkpoint float32, {args.requests} image requests ({args.concurrency} at a time, "
          f"{args.repeat:.0%} resending the one before), block size {args.block_size}, {args.bursts} bursts per server, {args.rounds} rounds")
    for name, runs in rows.items():
        rates = [r for m in runs for r in m["rates"]]
        per_round = ", ".join(f"{median(m['rates']):.1f}" for m in runs)
        size, log = max(m["bytes"] for m in runs), max(m["log_bytes"] for m in runs)
        extra = f"; {size / 1024:.0f} KiB of trace per request" if size else ""
        extra += f"; {log:.0f} B of batch log per request" if log else ""
        print(f"  {name:<24} median {median(rates):6.1f} requests/s ({median(rates) / base:.2f}x off; per round {per_round}; "
              f"range {min(rates):.1f}..{max(rates):.1f}){extra}")
        if name != "off":
            print(f"  {'':<24} {paired_line(rows['off'], runs)}")
            served = (args.concurrency * 2 + args.requests * args.bursts) * len(runs)
            print(f"  {'':<24} {clock_line([m['clock'] for m in runs if m['clock']], served)}")
            print(f"  {'':<24} {core_line([m['core'] for m in runs if m['core']])}")
            print(f"  {'':<24} {in_server_line([m['clock'] for m in runs if m['clock']], [m['core'] for m in runs if m['core']])}")
        print(f"  {'':<24} {cpu_line(runs)}")
    print(f"  tracing every request against none tagged, in one server (bursts in turn, a tagged burst timed until its traces are "
          f"indexed): median {median(alternating):.2f}x over {len(alternating)} pairs on {args.rounds} server(s) "
          f"(range {min(alternating):.2f}..{max(alternating):.2f})")


if __name__ == "__main__":
    main()
