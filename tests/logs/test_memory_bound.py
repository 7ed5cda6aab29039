"""Building a log's index keeps bounded memory (README, "memory stays bounded: one chunk's columns at a time go to
disk"): the peak resident memory of a fresh process that indexes a log and reports it does not grow with the log.

Resident memory, not tracemalloc: Arrow's and DuckDB's buffers are native allocations tracemalloc never sees. Each
size runs in its own process (benchmarks/log_parse.py's `qdebug_run`: `open_log_index` + the report, VmHWM read by
the child itself), so one run's peak is never another's.
"""

from __future__ import annotations

import itertools

from benchmarks.log_parse import qdebug_run
from tests.logs.log_synth import generate_log

CHUNK_MIB = 4  # the scan's chunk (README: "one native pass over each 4 MiB chunk")
# The scan holds a few chunks in flight (two worker threads + one read ahead) whatever the log's length: a longer log
# may add at most that window again (allocator slack); more is memory that grows with the log.
GROWTH_BOUND_MIB = 3 * CHUNK_MIB


def _head(src, dst, lines: int) -> None:
    """The first `lines` lines of a log: a shorter log of the same traffic."""
    with open(src, encoding="utf-8") as f, open(dst, "w", encoding="utf-8") as out:
        out.writelines(itertools.islice(f, lines))


def test_peak_resident_memory_does_not_grow_with_the_log(tmp_path):
    small, large = tmp_path / "small.log", tmp_path / "large.log"
    generate_log(large, 600_000, seed=1)  # about 50 MiB
    _head(large, small, 200_000)  # about 17 MiB: already past the chunks in flight, so its peak is the steady state
    assert small.stat().st_size > 3 * CHUNK_MIB * 2**20
    runs = {name: qdebug_run(path, str(tmp_path / f"cache-{name}")) for name, path in (("small", small), ("large", large))}
    assert runs["large"]["events"] > 2.5 * runs["small"]["events"]  # both were indexed, whole
    assert not runs["small"]["reused"] and not runs["large"]["reused"]
    growth = runs["large"]["maxrss_mb"] - runs["small"]["maxrss_mb"]
    # Measured 3 to 6 MiB (about 155 → 160 MiB) for 3x the events (the verdict SQL's per-request rows grow a little);
    # an index that held every chunk's columns to the end: 19 MiB more.
    assert growth < GROWTH_BOUND_MIB, {k: (r["events"], r["maxrss_mb"]) for k, r in runs.items()}
