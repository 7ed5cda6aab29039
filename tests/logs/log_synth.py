"""Synthetic runtime logs in the incident's format, with their truth: for tests and benchmarks at scale."""

from __future__ import annotations

import datetime as _dt
import os
import random
from dataclasses import dataclass, field

from qdebug.vocab import EventKind

_NOISE = (
    "INFO POST /v1/chat/completions accepted request_id={rid} images=1",
    "INFO request_id={rid} completed in {n} ms (completion_tokens=64)",
    "DEBUG scheduler: batch of {n} requests, kv_cache_usage=0.{n}",
    "INFO metrics: qwen_visual_embedding_buffer_hits={n} p95_latency_ms={n}",
    "DEBUG gc: freed {n} blocks in {n} us",
    "WARNING slow tokenizer call took {n} ms",
)


@dataclass
class LogTruth:
    """What a generated log holds, known line by line as it was written."""

    lines: int = 0
    events: int = 0
    unknown: int = 0
    requests: int = 0
    contaminated: dict[str, str] = field(default_factory=dict)  # victim -> donor of its last overwrite before its sync
    desync: int = 0
    shape_mismatch: int = 0
    index_out_of_bounds: int = 0
    late_overwrites: int = 0  # overwrites after the victim's sync: not contamination


def _script(rng: random.Random, rid: int, others: list[int]) -> list[tuple[str, str | None, str | None]]:
    """One request's lines as (message, kind, donor) with its occasional overwrite, desync, error or late overwrite.

    `kind` is the line's `EventKind`, or "event" (no truth to count) / "late" (an overwrite after the sync).
    """
    off = (rid % 16) * 256
    s = [(f"DEBUG VisualEncoder::encode_image: request_id={rid} start", "event", None),
         (f"DEBUG VisualEncoder::write_buffer: request_id={rid} wrote 256 tokens at offset {off}", "event", None)]
    roll = rng.random()
    donor = rng.choice(others) if others else rid + 1
    if roll < 0.04:
        s.append((f"DEBUG VisualEncoder::write_buffer: request_id={donor} overwrote buffer at offset {off} with 256 tokens (previously {rid})", EventKind.BUFFER_OVERWRITE, str(donor)))
        s.append((f"WARN TokenStreamDesyncWarning: visual token offset {off} differs from textual offset 0 (request_id={rid})", EventKind.DESYNC, None))
    elif roll < 0.05:
        s.append((f"ERROR VisualEmbeddingShapeMismatchError: expected shape (batch, seq_len, dim) but got (batch, dim) (request_id={rid})", EventKind.SHAPE_MISMATCH, None))
    elif roll < 0.06:
        s.append((f"ERROR CrossAttentionIndexOutOfBounds: token index {off + 256} exceeds sequence length {off} (request_id={rid})", EventKind.INDEX_OUT_OF_BOUNDS, None))
    s.append((f"DEBUG TokenSynchronizer::stitch: request_id={rid} consumed 256 tokens at offset {off}", EventKind.SYNC, None))
    if 0.06 <= roll < 0.07:
        s.append((f"DEBUG VisualEncoder::write_buffer: request_id={donor} overwrote buffer at offset {off} (previously {rid})", "late", str(donor)))
    s.append((f"DEBUG Generator::decode: request_id={rid} first_token", "event", None))
    return s


def generate_log(path: str | os.PathLike, n_lines: int, seed: int = 0, concurrency: int = 8) -> LogTruth:
    """Write n_lines lines (about 55% noise, `concurrency` requests interleaved, 0.5 ms apart); return the truth."""
    rng = random.Random(seed)
    start = int(_dt.datetime(2024, 7, 12, 14, 0, 0, tzinfo=_dt.timezone.utc).timestamp())
    truth = LogTruth()
    open_: dict[int, list] = {}
    next_rid = 1000
    pre_sync: dict[str, str] = {}
    stamps: dict[int, str] = {}
    mentioned: set[int] = set()
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        out = []
        for i in range(n_lines):
            ms = i // 2  # two lines per millisecond
            sec = start + ms // 1000
            stamp = stamps.get(sec)
            if stamp is None:
                stamps.clear()
                stamp = stamps[sec] = _dt.datetime.fromtimestamp(sec, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
            while len(open_) < concurrency:
                rid = next_rid
                next_rid += 1
                open_[rid] = _script(rng, rid, [r for r in open_ if r != rid])
            if rng.random() < 0.55:
                body = _NOISE[rng.randrange(len(_NOISE))].format(rid=rng.choice(list(open_)), n=rng.randrange(1000))
                truth.unknown += 1
            else:
                rid = rng.choice(list(open_))
                body, kind, donor = open_[rid].pop(0)
                truth.events += 1
                if kind == EventKind.BUFFER_OVERWRITE:
                    pre_sync[str(rid)] = donor
                elif kind == "late":
                    truth.late_overwrites += 1
                elif kind == EventKind.DESYNC:
                    truth.desync += 1
                elif kind == EventKind.SHAPE_MISMATCH:
                    truth.shape_mismatch += 1
                elif kind == EventKind.INDEX_OUT_OF_BOUNDS:
                    truth.index_out_of_bounds += 1
                elif kind == EventKind.SYNC and str(rid) in pre_sync:
                    truth.contaminated[str(rid)] = pre_sync.pop(str(rid))
                mentioned.add(rid)
                if donor is not None:
                    mentioned.add(int(donor))
                if not open_[rid]:
                    del open_[rid]
            out.append(f"{stamp}.{ms % 1000:03d}Z {body}\n")
            if len(out) >= 20000:
                f.writelines(out)
                out.clear()
        f.writelines(out)
    truth.contaminated.update(pre_sync)  # overwritten and never synced (the log ended first): contaminated too
    truth.lines = n_lines
    truth.requests = len(mentioned)
    return truth
