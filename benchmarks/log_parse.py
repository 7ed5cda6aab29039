"""Benchmark parse_runtime_log on a synthetic runtime log: lines/s and peak memory."""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import os
import random
import resource
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

# Runs as a script from anywhere: make the repository's package importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from qdebug.replay.formats.runtime_log import parse_runtime_log  # noqa: E402

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


def _maxrss_mb() -> float:
    """This process's peak resident set so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(path: str | os.PathLike) -> dict:
    """Parse the log twice: once timed (with the ru_maxrss delta), once under tracemalloc for its peak."""
    size = os.path.getsize(path)
    gc.collect()
    rss_before = _maxrss_mb()
    t0 = time.perf_counter()
    batch = parse_runtime_log(path)
    seconds = time.perf_counter() - t0
    rss_delta = _maxrss_mb() - rss_before
    result = {
        "lines": batch.total_lines,
        "bytes": size,
        "events": len(batch.events),
        "requests": len(batch.requests),
        "unknown_lines": batch.unknown_lines,
        "seconds": seconds,
        "lines_per_s": batch.total_lines / seconds if seconds else float("inf"),
        "mb_per_s": size / 2**20 / seconds if seconds else float("inf"),
        "maxrss_delta_mb": rss_delta,
    }
    del batch
    gc.collect()
    # tracemalloc slows the parse several-fold, so it gets its own run and no timing.
    tracemalloc.start()
    batch = parse_runtime_log(path)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    result["tracemalloc_peak_mb"] = peak / 2**20
    result["bytes_per_event"] = peak / max(1, len(batch.events))
    return result


def main(argv: list[str] | None = None) -> None:
    """Generate a log, parse it, print the figures."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--lines", type=int, default=1_000_000, help="lines in the synthetic log")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", help="write the log here and keep it (default: a temp file, removed)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.keep) if args.keep else Path(tmp) / "synthetic.log"
        t0 = time.perf_counter()
        generate_log(path, args.lines, args.seed)
        gen_s = time.perf_counter() - t0
        r = measure(path)
    print(f"generated {r['lines']:,} lines ({r['bytes'] / 2**20:.1f} MiB) in {gen_s:.1f} s")
    print(f"parsed in {r['seconds']:.2f} s: {r['lines_per_s']:,.0f} lines/s, {r['mb_per_s']:.1f} MiB/s")
    print(f"events {r['events']:,}, requests {r['requests']:,}, unknown lines {r['unknown_lines']:,}")
    print(
        f"peak memory: tracemalloc {r['tracemalloc_peak_mb']:.1f} MiB "
        f"({r['bytes_per_event']:.0f} B per event), ru_maxrss delta {r['maxrss_delta_mb']:.1f} MiB"
    )


if __name__ == "__main__":
    main()
