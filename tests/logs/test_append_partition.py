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


def test_a_log_logrotate_renamed_keeps_its_partition(cache, tmp_path):
    """Yesterday's `svc.log`, renamed `svc.log.1` by logrotate, is not read again: its partition is reused under its
    new name, only today's `svc.log` is read, and the index equals one built from scratch."""
    log, rotated = tmp_path / "svc.log", tmp_path / "svc.log.1"
    generate_log(log, 20_000, seed=1)
    open_log_index([log])[0].close()
    log.rename(rotated)
    generate_log(log, 20_000, seed=2)
    read = []
    both, reused, _ = open_log_index([rotated, log], progress=lambda done, total, lines: read.append(done))
    assert not reused and both.meta["reused_parts"] == 1
    assert min(read) >= rotated.stat().st_size  # the rotated file's bytes count as done: only the new one was read
    fresh, _ = build_index([rotated, log], tmp_path / "fresh")
    assert index_tables(both) == index_tables(fresh)
    keys = ("total_lines", "unknown_lines", "events", "files", "sources", "bytes_read", "bytes_total")
    assert {k: both.meta[k] for k in keys} == {k: fresh.meta[k] for k in keys}
    assert [f["path"] for f in both.meta["files"]] == [str(rotated), str(log)]


def test_a_file_rewritten_in_place_with_its_old_mtime_is_read_again(cache, tmp_path):
    """Same inode, same size, same mtime (set back), same first and last 64 KiB: a middle rewritten (every id in the
    middle third) still makes it another file. (A change confined to bytes between the 16 sampled blocks is not seen:
    the identity reads 200 KiB of a file, not all of it.)"""
    import os

    a, b = tmp_path / "svc.log.1", tmp_path / "svc.log"
    generate_log(a, 20_000, seed=1)
    generate_log(b, 2_000, seed=2)
    open_log_index([a])[0].close()
    st = a.stat()
    data = a.read_bytes()
    third = len(data) // 3
    middle = data[third : 2 * third].replace(b"request_id=1", b"request_id=9")
    assert middle != data[third : 2 * third]
    with open(a, "r+b") as f:  # in place: the inode stays
        f.seek(third)
        f.write(middle)
    os.utime(a, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (a.stat().st_ino, a.stat().st_size, a.stat().st_mtime_ns) == (st.st_ino, st.st_size, st.st_mtime_ns)
    both, _, _ = open_log_index([a, b])
    assert both.meta["reused_parts"] == 0
