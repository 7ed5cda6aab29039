"""Benchmark reading runtime logs: naive baseline vs qdebug's indexed parse, peak memory, index size, re-open time."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path


_NOISE = (
    "INFO POST /v1/chat/completions accepted request_id={rid} images=1",
    "INFO request_id={rid} completed in {ms} ms (completion_tokens=64)",
    "DEBUG scheduler: batch of {n} requests, kv_cache_usage=0.{ms}",
    "INFO metrics: qwen_visual_embedding_buffer_hits={n} p95_latency_ms={ms}",
    "DEBUG gc: freed {n} blocks in {ms} us",
    "WARNING slow tokenizer call took {ms} ms",
)


def _request_lines(rng: random.Random, rid: int, offset: int) -> list[str]:
    """The recognised lines of one request's life, with an occasional overwrite, desync or error."""
    lines = [
        f"DEBUG VisualEncoder::encode_image: request_id={rid} start",
        f"DEBUG VisualEncoder::write_buffer: request_id={rid} wrote 256 tokens at offset {offset}",
    ]
    roll = rng.random()
    if roll < 0.05:
        lines.append(
            f"DEBUG VisualEncoder::write_buffer: request_id={rid + 1} overwrote buffer "
            f"at offset {offset} (previously {rid})"
        )
        lines.append(
            f"WARN TokenStreamDesyncWarning: visual token offset {offset} "
            f"differs from textual offset 0 (request_id={rid})"
        )
    elif roll < 0.06:
        lines.append("ERROR VisualEmbeddingShapeMismatchError: expected shape (batch, seq_len, dim) but got (batch, dim)")
    elif roll < 0.07:
        lines.append(
            f"ERROR CrossAttentionIndexOutOfBounds: token index {offset + 256} "
            f"exceeds sequence length {offset} (request_id={rid})"
        )
    lines.append(f"DEBUG TokenSynchronizer::stitch: request_id={rid} consumed 256 tokens at offset {offset}")
    lines.append(f"DEBUG Generator::decode: request_id={rid} first_token")
    return lines


def generate_log(path: str | os.PathLike, n_lines: int, seed: int = 0) -> Path:
    """Write a synthetic runtime log of exactly n_lines lines (about 60% noise, many request ids)."""
    rng = random.Random(seed)
    start = _dt.datetime(2024, 7, 12, 14, 0, 0, tzinfo=_dt.timezone.utc).timestamp()
    out = Path(path)
    written = 0
    rid = 1000
    pending: list[str] = []
    with open(out, "w", encoding="utf-8") as f:
        chunk: list[str] = []
        while written < n_lines:
            if not pending or rng.random() < 0.6:
                fmt = _NOISE[rng.randrange(len(_NOISE))]
                body = fmt.format(rid=rid, ms=rng.randrange(1000), n=rng.randrange(64))
            else:
                body = pending.pop(0)
            if not pending:
                rid += 1
                pending = _request_lines(rng, rid, (rid % 8) * 256)
            t = start + written * 0.0005
            stamp = _dt.datetime.fromtimestamp(t, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
            chunk.append(f"{stamp}Z {body}\n")
            written += 1
            if len(chunk) >= 10000:
                f.writelines(chunk)
                chunk.clear()
        f.writelines(chunk)
    return out


_NAIVE_RE = re.compile(rb"request_id=(\S+) (wrote|consumed|overwrote|start|first_token)")


def naive(path: str | os.PathLike) -> dict:
    """The obvious baseline: a substring prefilter, then one compiled regex on the lines that pass (keeps nothing)."""
    t0, c0 = time.perf_counter(), time.process_time()
    lines = hits = 0
    with open(path, "rb") as f:
        for line in f:
            lines += 1
            if b"request_id" in line and _NAIVE_RE.search(line):
                hits += 1
    return {"lines": lines, "hits": hits, "seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0}


def disk_read(path: str | os.PathLike) -> dict:
    """Reading the file in 4 MiB chunks and counting lines: the ceiling for any line-based parser."""
    t0 = time.perf_counter()
    lines = size = 0
    with open(path, "rb") as f:
        while chunk := f.read(4 << 20):
            lines += chunk.count(b"\n")
            size += len(chunk)
    seconds = time.perf_counter() - t0
    return {"lines": lines, "seconds": seconds, "mb_per_s": size / 2**20 / seconds}


def scan_only(path: str | os.PathLike, native: bool = True) -> dict:
    """qdebug's recognition alone (column-wise scan, rows handed to a no-op): what indexing adds is the rest.
    `native`: with the native pass (when built), else with the RE2 passes alone."""
    from qdebug.replay.formats import log_columns  # loaded first: pyarrow's import is not the scan's time
    from qdebug.replay.formats.log_scan import scan_files

    before = log_columns.use_native(native)
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        stats = scan_files([Path(path)], lambda table: None, as_tables=True)
        return {"lines": stats.total_lines, "seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0,
                "native": log_columns.native_built() and native}
    finally:
        log_columns.use_native(before)


_CHILD = """
import json, os, resource, sys, time
i0, ic0 = time.perf_counter(), time.process_time()
import qdebug  # first, as `qdebug replay` has it (it chooses Arrow's allocator before pyarrow loads)
import numpy, pyarrow, pyarrow.compute, pyarrow.parquet, duckdb  # the libraries, once per process: reported apart
import qdebug.replay.formats.log_columns
from qdebug.analysis.log_index_build import open_log_index
from qdebug.analysis.log_report import report_from_index
import qdebug.replay.log_sql as log_sql
imports, imports_cpu = time.perf_counter() - i0, time.process_time() - ic0
derive, sql = log_sql.derive_tables, {"cpu": 0.0}

def timed_derive(*args, **kwargs):  # the verdict SQL's share, timed apart
    c = time.process_time()
    try:
        return derive(*args, **kwargs)
    finally:
        sql["cpu"] += time.process_time() - c

log_sql.derive_tables = timed_derive


def peak_mb():  # this process's own peak: VmHWM starts afresh at exec, ru_maxrss keeps the parent's (a --check run's)
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

t0, c0 = time.perf_counter(), time.process_time()
index, reused, _ = open_log_index([sys.argv[1]])
c1 = time.process_time()
report = report_from_index(index)
size = sum(p.stat().st_size for p in index.path.iterdir() if p.is_file())
# process_time counts every thread of this process: the scan's worker threads included
out = {"seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0, "reused": reused,
       "sql_cpu": sql["cpu"], "report_cpu": time.process_time() - c1, "build_cpu": c1 - c0,
       "imports": imports, "imports_cpu": imports_cpu,
       "maxrss_mb": peak_mb(), "index_bytes": size,
       "lines": index.meta["total_lines"], "events": index.meta["events"], "requests": index.request_count(),
       "findings": index.finding_counts()}
print(json.dumps(out))
"""


def qdebug_run(path: str | os.PathLike, cache: str) -> dict:
    """One `open_log_index` + report in a fresh process (its own peak RSS): builds, or reopens when cached."""
    env = {**os.environ, "QDEBUG_CACHE_DIR": cache, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    out = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def check_reference(path: Path, cache: str) -> bool:
    """Whether the cached index equals, table by table, the line-by-line reference (tests/logs/reference_index.py)."""
    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root))
    os.environ["QDEBUG_CACHE_DIR"] = cache
    from qdebug.analysis.log_index_build import open_log_index
    from tests.logs.reference_index import index_tables, reference_tables

    index, _reused, _ = open_log_index([path])
    got, want = index_tables(index), reference_tables(path)
    index.close()
    return all(got[t] == want[t] for t in want)


def bench(n_lines: int, seed: int, keep: str | None, check: bool) -> None:
    """Generate one log and print every figure for it."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(keep) if keep else Path(tmp) / "synthetic.log"
        t0 = time.perf_counter()
        generate_log(path, n_lines, seed)
        size = path.stat().st_size
        print(f"\n== {n_lines:,} lines ({size / 2**20:.0f} MiB), generated in {time.perf_counter() - t0:.1f} s")
        disk = disk_read(path)
        base = naive(path)
        built = qdebug_run(path, str(Path(tmp) / "cache"))
        again = qdebug_run(path, str(Path(tmp) / "cache"))
        scan = scan_only(path)  # after the children, which report their own peak (VmHWM) anyway
        scan_re2 = scan_only(path, native=False)
        base2 = naive(path)  # again after, so machine load drifting during the run shows
        equal = check_reference(path, str(Path(tmp) / "cache")) if check else None
    n = base["lines"]
    best_naive = min(base["seconds"], base2["seconds"])
    naive_cpu = min(base["cpu"], base2["cpu"])  # the better of the two runs: load only ever slows it
    print(f"disk read (4 MiB chunks):  {disk['mb_per_s']:,.0f} MiB/s = {disk['lines'] / disk['seconds']:,.0f} lines/s")
    print(f"naive baseline:            {n / best_naive:,.0f} lines/s ({best_naive:.2f} s wall, {naive_cpu:.2f} s cpu)")
    rate = n / built["seconds"]
    print(f"library imports:           {built['imports']:.2f} s wall, {built['imports_cpu']:.2f} s cpu "
          "(numpy, pyarrow, duckdb: once per process, not in the figures below unless said)")
    print(f"qdebug (parse + index):    {rate:,.0f} lines/s ({built['seconds']:.2f} s wall, {built['cpu']:.2f} s cpu; "
          f"{n / built['cpu']:,.0f} lines per cpu-second)")
    print(f"ratio qdebug / naive:      {rate / (n / best_naive):.2f} (wall), {naive_cpu / built['cpu']:.2f} (cpu); "
          f"with the imports {n / (built['seconds'] + built['imports']) / (n / best_naive):.2f} (wall), "
          f"{naive_cpu / (built['cpu'] + built['imports_cpu']):.2f} (cpu)")
    print(f"  where the cpu goes:      scan and store {built['build_cpu'] - built['sql_cpu']:.2f} s, verdict SQL "
          f"{built['sql_cpu']:.2f} s, report {built['report_cpu']:.2f} s")
    how = "native pass" if scan["native"] else "RE2 passes: the native pass is NOT built"
    print(f"recognition alone:         {n / scan['seconds']:,.0f} lines/s ({scan['cpu']:.2f} s cpu; "
          f"ratio to naive {naive_cpu / scan['cpu']:.2f} per cpu-second; {how})")
    print(f"  with RE2 passes alone:   {n / scan_re2['seconds']:,.0f} lines/s ({scan_re2['cpu']:.2f} s cpu; "
          f"ratio to naive {naive_cpu / scan_re2['cpu']:.2f} per cpu-second)")
    print(f"load average (1 min):      {os.getloadavg()[0]:.2f} at the end of the run (2 cores)")
    print(f"share of disk read rate:   {rate / (disk['lines'] / disk['seconds']):.1%}")
    print(f"peak memory (RSS):         {built['maxrss_mb']:.0f} MiB building, {again['maxrss_mb']:.0f} MiB re-opening")
    print(f"index size:                {built['index_bytes'] / 2**20:.0f} MiB ({built['index_bytes'] / size:.0%} of the log)")
    print(f"re-open (cached index):    {again['seconds']:.3f} s (reused={again['reused']})")
    print(f"events {built['events']:,}, requests {built['requests']:,}, findings {built['findings']}")
    if equal is not None:
        print(f"index equals the line-by-line reference, table by table: {'yes' if equal else 'NO'}")


def main(argv: list[str] | None = None) -> None:
    """Generate logs of the given sizes and print naive vs qdebug figures for each."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--lines", default="1000000,10000000", help="comma-separated log sizes in lines")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", help="write the (last) log here and keep it (default: a temp file, removed)")
    ap.add_argument("--check", type=int, default=1_000_000, metavar="LINES",
                    help="compare the index with the line-by-line reference, table by table, for logs up to this size (0: never)")
    ap.add_argument("--quick", action="store_true", help="one 20,000-line log, seconds: checks the benchmark still runs (figures mean little)")
    args = ap.parse_args(argv)
    if args.quick:
        args.lines = "20000"
    for n in (int(x) for x in args.lines.split(",")):
        try:
            bench(n, args.seed, args.keep, n <= args.check)
        except KeyboardInterrupt:
            print(f"\ninterrupted during the {n:,}-line run: figures above are what was measured")
            return


if __name__ == "__main__":
    main()
