"""Building a log's index keeps bounded memory: the tracemalloc peak does not grow with the number of events."""

from __future__ import annotations

import tracemalloc

from qdebug.analysis.log_index_build import open_log_index
from tests.logs.log_synth import generate_log


def _peak(path) -> int:
    tracemalloc.start()
    try:
        index, _, _ = open_log_index([path], use_cache=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    index.close()
    return peak


def test_peak_memory_independent_of_log_length(tmp_path, cache):
    small, large = tmp_path / "small.log", tmp_path / "large.log"
    # The small log (about 20 MiB) is already longer than the chunks the scan holds in flight (worker threads + 1 read
    # ahead, 4 MiB each): a shorter one never fills that window and its peak understates the steady state.
    t_small = generate_log(small, 250_000, seed=1)
    t_large = generate_log(large, 1_000_000, seed=2)
    assert t_large.events > 3.5 * t_small.events
    p_small, p_large = _peak(small), _peak(large)
    # 4x the events; the old parser's peak grew with them (≈ 430 B per event). Allow a small constant, not a factor.
    assert p_large < p_small + 8 * 2**20, (p_small, p_large)
    assert p_large < 64 * 2**20
