"""Fast chunked scan of runtime logs (plain or .gz, several files in time order) into compact event rows.

Same events as `recognise_line` (a fast path for the common line shapes, the general recogniser for the
rest: `log_line`), but read in large chunks and recognised column-wise (`log_columns`), as Arrow tables.
"""

from __future__ import annotations

import os
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from qdebug.errors import ReplayFormatError

from .log_line import Row, _seconds_cache
from .runtime_log import MAX_LINE_BYTES, _prefix, checked_log_path, open_log, starts_gzip

CHUNK_BYTES = 4 << 20  # per chunk in flight, a few times this in memory while it is recognised


@dataclass
class ScanStats:
    """What a scan read: lines, unknown lines, bytes and the files in the order they were read."""

    total_lines: int = 0
    unknown_lines: int = 0
    events: int = 0
    bytes_read: int = 0
    bytes_total: int = 0  # the files' sizes when the scan began (what it reads, however they change meanwhile)
    files: list[dict] = field(default_factory=list)  # {path, first_line, lines}
    changes: list[dict] = field(default_factory=list)  # {path, change: grew|shrank, size_at_start, size_at_end, bytes_read}
    read_seconds: float = 0.0  # time inside the raw read calls: bytes_read / read_seconds is the disk's (or cache's) rate


def first_timestamp(path: Path, max_lines: int = 200) -> float | None:
    """The first timestamp among a file's first lines (None when there is none, or for a pipe, whose lines a look
    would consume): orders rotated files."""
    if not is_regular(path):
        return None
    try:
        with open_log(path) as f:
            for _ in range(max_lines):
                raw = f.readline(4096)
                if not raw:
                    break
                t, _pos = _prefix(raw.decode("utf-8", "replace"))
                if t is not None:
                    return t
    except (OSError, EOFError, zlib.error):
        return None
    return None


def order_files(paths: list[Path]) -> list[Path]:
    """Files in time order (by first timestamp; files without one keep their place after those with one)."""
    if len(paths) < 2:
        return list(paths)
    keyed = [(first_timestamp(p), i, p) for i, p in enumerate(paths)]
    with_t = sorted((t, i, p) for t, i, p in keyed if t is not None)
    return [p for _, _, p in with_t] + [p for t, _, p in keyed if t is None]


def _blocks(f, progress: Callable[[int], None] | None, limit: int | None = None,
            stats: ScanStats | None = None) -> Iterator[tuple[bytes | bytearray, int, bool]]:
    """(buf, stop, overlong) per chunk: buf[0] is a newline, the complete lines are buf[1:stop], each ending in one.

    Overlong says an over-long line followed them (counted once as an unknown line).
    At most `limit` bytes are read (a log still being written ends where it ended when the scan began).
    """
    carry = b""
    skipping = False
    raw = getattr(f, "fileobj", None) or f  # a .gz reports progress in compressed bytes
    left = limit
    clock = time.perf_counter
    while True:
        # read straight into the chunk, behind its newline and the line carried over: no copy of 4 MiB a chunk. A
        # bytearray, zero-filled first, but on heap pages reused chunk after chunk: an uninitialised numpy array (huge
        # pages) and an anonymous mmap (fresh pages) each cost more system time than the fill (1 M lines: +0.1 s)
        want = CHUNK_BYTES if left is None else min(CHUNK_BYTES, left)
        head = 1 + len(carry)
        buf = bytearray(head + want)
        buf[0] = 10
        buf[1:head] = carry
        t0 = clock()
        got = f.readinto(memoryview(buf)[head:]) if want else 0
        if stats is not None:
            stats.read_seconds += clock() - t0
        if left is not None:
            left -= got
        if progress is not None:
            progress(raw.tell())
        if not got:
            break
        del buf[head + got :]
        if skipping:  # the rest of an over-long line: dropped up to its end (carry is empty meanwhile)
            cut = buf.find(b"\n", 1)
            if cut < 0:
                continue
            del buf[1 : cut + 1]
            skipping = False
        stop = buf.rfind(b"\n") + 1
        carry = bytes(buf[stop:])
        overlong = len(carry) >= MAX_LINE_BYTES
        if overlong:
            carry, skipping = b"", True
        yield buf, stop, overlong
    if carry:
        yield b"\n" + carry + b"\n", len(carry) + 2, False


# Logs of at least two chunks are recognised by worker threads (one per core), chunks in flight in parallel while
# this thread reads ahead and stores: measured on an 8 MiB log, 0.049 s wall against 0.065 s on one thread (0.079 s
# of CPU against 0.065). A single chunk has nothing to overlap.
POOL_MIN_BYTES = 2 * CHUNK_BYTES


def scan_files(
    paths: list[Path],
    on_rows: Callable[[list[Row]], None],
    progress: Callable[[int, int, int], None] | None = None,
    stats: ScanStats | None = None,
    as_tables: bool = False,
    on_summary: Callable | None = None,
) -> ScanStats:
    """Read the files in order, call on_rows with each chunk's events; progress(bytes, total, lines).

    The events are row tuples, or (as_tables) Arrow tables in log_columns.EVENT_SCHEMA with no Python object per
    line; on_summary, when given, gets each chunk's summary for the verdict SQL (log_partials.Summary) just before its
    events. A KeyboardInterrupt stops the scan after the events handed over so far (stats say how far it got).
    """
    from .log_columns import scan_block_table  # pyarrow loads only when a log is read
    from .log_partials import renumber
    from .log_pool import ChunkPool

    stats = stats if stats is not None else ScanStats()
    sizes = [p.stat().st_size for p in paths]
    # a stats already holding files (an index appended to) goes on from where they ended
    total_bytes = stats.bytes_total = stats.bytes_total + sum(sizes)
    done_before = stats.bytes_read
    clock = _seconds_cache()
    seq = stats.events
    big = sum(s * _expansion(p) for p, s in zip(paths, sizes) if is_regular(p)) >= POOL_MIN_BYTES
    with ChunkPool(big) as pool:
        for path, size in zip(paths, sizes):
            shown = str(path) if len(str(path)) <= 200 else str(path)[:200] + "..."
            entry = {"path": str(path), "first_line": stats.total_lines + 1, "lines": 0}
            stats.files.append(entry)

            def tick(pos: int, _base=done_before) -> None:
                stats.bytes_read = _base + pos
                if progress is not None:
                    progress(stats.bytes_read, total_bytes, stats.total_lines)

            try:
                with open_log(path) as f:
                    plain = getattr(f, "fileobj", None) is None  # a .gz is read whole (its stream says where it ends)
                    blocks = _blocks(f, tick, size if plain and is_regular(path) else None, stats)
                    for table, summary, lines, unknown, overlong in pool.scan(blocks, scan_block_table, clock):
                        if overlong:  # counted once as an unknown line, after the chunk's complete lines
                            lines += 1
                            unknown += 1
                        if on_summary is not None and table.num_rows:
                            on_summary(renumber(summary, stats.total_lines, seq))
                        table = pool.renumber(table, stats.total_lines, seq)
                        seq += table.num_rows
                        stats.total_lines += lines
                        entry["lines"] += lines
                        stats.unknown_lines += unknown
                        stats.events = seq
                        if table.num_rows:
                            on_rows(table if as_tables else _rows(table))
                    _note_change(stats, path, size, os.fstat((getattr(f, "fileobj", None) or f).fileno()).st_size, stats.bytes_read - done_before)
            except (OSError, EOFError, zlib.error) as exc:  # EOFError, zlib.error: a truncated or corrupt .gz
                reason = getattr(exc, "strerror", None) or exc
                raise ReplayFormatError(f"cannot read runtime log {shown}: {reason} (expected a readable log file)") from None
            done_before += size
    return stats


def _rows(table) -> list[Row]:
    """An events table as row tuples."""
    return list(zip(*(table.column(i).to_pylist() for i in range(table.num_columns))))


def _expansion(path: Path) -> int:
    """About how many bytes of lines a file's byte holds: a gzip'd log (by its magic bytes) several, a plain one one."""
    return 8 if starts_gzip(path) else 1


def is_regular(path: Path) -> bool:
    """A regular file (a pipe has no size to stop at)."""
    import stat

    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _note_change(stats: ScanStats, path: Path, start: int, end: int, read: int) -> None:
    """Record a file that grew (appended to while read: the scan stopped at its size at the start) or shrank
    (truncated, as copytruncate rotation does: the scan read only what was there before)."""
    change = "grew" if end > start else "shrank" if end < start and read < start else None
    if change and is_regular(path):
        stats.changes.append({"path": str(path), "change": change, "size_at_start": start,
                              "size_at_end": end, "bytes_read": read})


def log_paths(paths: list[str | os.PathLike]) -> list[Path]:
    """Checked log paths (one-line errors for missing files and directories)."""
    return [checked_log_path(p) for p in paths]

