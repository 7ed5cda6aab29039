"""A log file appended to the list (a rotated file, a newer day) adds a partition: the partitions of the files
already indexed are reused as they are, only the new file is read, and the index equals one built from scratch."""

from __future__ import annotations

from qdebug.analysis.log_index_build import build_index, open_log_index
from tests.logs.log_synth import generate_log

from .reference_index import index_tables


def test_appending_a_file_reads_only_that_file(cache, tmp_path):
    a, b = tmp_path / "svc.log.1", tmp_path / "svc.log"
    generate_log(a, 30_000, seed=1)
    generate_log(b, 30_000, seed=2)
    first, reused, _ = open_log_index([a])
    assert not reused and first.meta["reused_parts"] == 0
    first.close()
    read = []
    both, reused, _ = open_log_index([a, b], progress=lambda done, total, lines: read.append(done))
    assert not reused and both.meta["reused_parts"] == 1
    assert min(read) >= a.stat().st_size  # a's bytes count as done: only b was read
    fresh, _ = build_index([a, b], tmp_path / "fresh")
    assert index_tables(both) == index_tables(fresh)
    keys = ("total_lines", "unknown_lines", "events", "files", "sources", "bytes_read", "bytes_total")
    assert {k: both.meta[k] for k in keys} == {k: fresh.meta[k] for k in keys}


def test_a_changed_earlier_file_is_read_again(cache, tmp_path):
    a, b = tmp_path / "svc.log.1", tmp_path / "svc.log"
    generate_log(a, 5_000, seed=1)
    generate_log(b, 5_000, seed=2)
    open_log_index([a])[0].close()
    with open(a, "ab") as f:
        f.write(b"2024-07-12T14:23:09.000Z DEBUG Generator::decode: request_id=99 first_token\n")
    both, _, _ = open_log_index([a, b])
    assert both.meta["reused_parts"] == 0 and both.meta["total_lines"] == 10_001
