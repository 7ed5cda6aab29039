"""Fast chunked scan of runtime logs (plain or .gz, several files in time order) into compact event rows.

Same events as `recognise_line` (a fast path for the common line shapes, the general recogniser for the
rest), but read in large chunks, recognised column-wise (`log_columns`) and emitted as plain tuples.
"""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from qdebug.errors import ReplayFormatError
from qdebug.input_files import refuse_special
from qdebug.vocab import EVENT_KINDS, EventKind

from .runtime_log import MAX_LINE_BYTES, _prefix, open_log, recognise_line

CHUNK_BYTES = 4 << 20
KIND_CODE = {kind: i for i, kind in enumerate(EVENT_KINDS)}
_ENCODE, _WRITE, _SYNC, _FIRST = (KIND_CODE[k] for k in (EventKind.ENCODE_START, EventKind.BUFFER_WRITE, EventKind.SYNC, EventKind.FIRST_TOKEN))

# The shapes a busy service prints millions of times, recognised by splitting on spaces (several times faster
# than a regex): `<ISO time>Z LEVEL <where>: request_id=<id> <words>`. Ids are plain ([0-9A-Za-z-]) so none
# can hide a keyword the general recogniser would react to; anything else goes to recognise_line.
_LEVEL_WORDS = frozenset((b"DEBUG", b"INFO", b"WARN", b"WARNING", b"ERROR", b"TRACE"))
_SHORT = {b"VisualEncoder::encode_image:": (_ENCODE, b"start"), b"Generator::decode:": (_FIRST, b"first_token")}
_LONG = {b"VisualEncoder::write_buffer:": (_WRITE, b"wrote"), b"TokenSynchronizer::stitch:": (_SYNC, b"consumed")}
_TAIL = [b"tokens", b"at", b"offset"]
_EXC_KEYS = (b"TokenStreamDesync", b"VisualEmbeddingShapeMismatch", b"CrossAttentionIndexOutOfBounds")
_EXC_SEARCH = re.compile(b"|".join(_EXC_KEYS)).search
# Without an exception name, a line is an event only if it has one of these words (as recognise_line decides).
_EVENT_WORD = re.compile(rb"wrote|encode_image|first|stitch|concat|consumed").search
# The fast shapes' messages are stored as NULL and rebuilt from the fields on reading (see fast_message).
_FAST_MESSAGE = {
    _ENCODE: "VisualEncoder::encode_image: request_id={rid} start",
    _WRITE: "VisualEncoder::write_buffer: request_id={rid} wrote {tokens} tokens at offset {offset}",
    _SYNC: "TokenSynchronizer::stitch: request_id={rid} consumed {tokens} tokens at offset {offset}",
    _FIRST: "Generator::decode: request_id={rid} first_token",
}

# Row: (seq, line, t, kind code, request id, donor, offset, text_offset, tokens, message or None: see fast_message)
Row = tuple


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


def _seconds_cache() -> tuple[dict, Callable[[bytes], float | None]]:
    """(cache, fill): epoch seconds of `YYYY-MM-DDTHH:MM:SS`, cached per second (a log repeats each many times)."""
    cache: dict[bytes, float | None] = {}

    def seconds(stamp: bytes) -> float | None:
        if len(cache) > 200_000:
            cache.clear()
        t = cache[stamp] = _prefix(stamp.decode("ascii"))[0]
        return t

    return cache, seconds


def first_timestamp(path: Path, max_lines: int = 200) -> float | None:
    """The first timestamp among a file's first lines (None when there is none): orders rotated files."""
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


def _chunks(f, progress: Callable[[int], None] | None) -> Iterator[list[bytes]]:
    """Lists of complete lines (no newline) from a binary file; an over-long line becomes one None."""
    carry = b""
    skipping = False
    raw = getattr(f, "fileobj", None) or f  # a .gz reports progress in compressed bytes
    while True:
        data = f.read(CHUNK_BYTES)
        if progress is not None:
            progress(raw.tell())
        if not data:
            break
        if skipping:
            cut = data.find(b"\n")
            if cut < 0:
                continue
            data, skipping = data[cut + 1 :], False
        lines = (carry + data).split(b"\n") if carry else data.split(b"\n")
        carry = lines.pop()
        if len(carry) >= MAX_LINE_BYTES:
            lines.append(None)  # counted once as an unknown line; the rest of it is skipped
            carry, skipping = b"", True
        yield lines
    if carry:
        yield [carry]


def _blocks(f, progress: Callable[[int], None] | None, limit: int | None = None) -> Iterator[tuple[bytes, int, bool]]:
    """(buf, stop, overlong) per chunk: buf[0] is a newline, the complete lines are buf[1:stop], each ending in one.

    Same lines as `_chunks` (the reference): overlong says an over-long line followed them (one unknown line).
    At most `limit` bytes are read (a log still being written ends where it ended when the scan began).
    """
    carry = b""
    skipping = False
    raw = getattr(f, "fileobj", None) or f  # a .gz reports progress in compressed bytes
    left = limit
    while True:
        data = f.read(CHUNK_BYTES if left is None else min(CHUNK_BYTES, left))
        if left is not None:
            left -= len(data)
        if progress is not None:
            progress(raw.tell())
        if not data:
            break
        if skipping:
            cut = data.find(b"\n")
            if cut < 0:
                continue
            data, skipping = data[cut + 1 :], False
        buf = b"\n" + carry + data
        stop = buf.rfind(b"\n") + 1
        carry = buf[stop:]
        overlong = len(carry) >= MAX_LINE_BYTES
        if overlong:
            carry, skipping = b"", True
        yield buf, stop, overlong
    if carry:
        yield b"\n" + carry + b"\n", len(carry) + 2, False


def scan_files(
    paths: list[Path],
    on_rows: Callable[[list[Row]], None],
    progress: Callable[[int, int, int], None] | None = None,
    stats: ScanStats | None = None,
) -> ScanStats:
    """Read the files in order, call on_rows with each chunk's event rows; progress(bytes, total, lines).

    A KeyboardInterrupt stops the scan after the rows handed over so far (stats say how far it got).
    """
    from .log_columns import scan_block_columns  # pyarrow loads only when a log is read

    stats = stats if stats is not None else ScanStats()
    sizes = [p.stat().st_size for p in paths]
    total_bytes = stats.bytes_total = sum(sizes)
    done_before = 0
    clock = _seconds_cache()
    seq = 0
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
                for buf, stop, overlong in _blocks(f, tick, size if plain and is_regular(path) else None):
                    rows, seq, lines, unknown = scan_block_columns(buf, stop, stats.total_lines, seq, clock)
                    if overlong:  # counted once as an unknown line, after the chunk's complete lines
                        lines += 1
                        unknown += 1
                    stats.total_lines += lines
                    entry["lines"] += lines
                    stats.unknown_lines += unknown
                    stats.events = seq
                    if rows:
                        on_rows(rows)
                _note_change(stats, path, size, os.fstat((getattr(f, "fileobj", None) or f).fileno()).st_size, stats.bytes_read - done_before)
        except (OSError, EOFError, zlib.error) as exc:  # EOFError, zlib.error: a truncated or corrupt .gz
            reason = getattr(exc, "strerror", None) or exc
            raise ReplayFormatError(f"cannot read runtime log {shown}: {reason} (expected a readable log file)") from None
        done_before += size
    return stats


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


def _scan_line(raw: bytes, line_no: int, seq: int, clock) -> Row | None:
    """One line's event row (numbered line_no, seq), or None when it is no event (unknown, or blank)."""
    cache, seconds = clock
    if b"request_id" in raw:
        parts = raw.split(b" ")
        n = len(parts)
        if (n == 5 or n == 10) and parts[1] in _LEVEL_WORDS and parts[3][:11] == b"request_id=":
            shape = (_SHORT if n == 5 else _LONG).get(parts[2])
            last = parts[-1]
            if last[-1:] == b"\r":
                last = last[:-1]
            stamp, rid = parts[0], parts[3][11:]
            if (
                shape is not None and stamp[-1:] == b"Z" and 0 < len(rid) <= 64 and (rid.isdigit() or (
                    rid.replace(b"-", b"").isalnum() and _EXC_SEARCH(raw) is None))
                and (last == shape[1] if n == 5 else (
                    parts[4] == shape[1] and parts[6:9] == _TAIL and parts[5].isdigit() and last.isdigit()
                    and len(parts[5]) <= 18 and len(last) <= 18))
            ):
                key = stamp[:19]
                t = cache.get(key, -1.0)
                if t == -1.0:
                    t = seconds(key)
                frac = stamp[20:-1]
                if t is not None and (
                    len(stamp) == 20 or (stamp[19:20] == b"." and 0 < len(frac) <= 9 and frac.isdigit())
                ):
                    if frac:
                        t = t + int(frac) / 10 ** len(frac)
                    if n == 5:
                        return (seq, line_no, t, shape[0], rid.decode(), None, None, None, None, None)
                    return (seq, line_no, t, shape[0], rid.decode(), None, int(last), None, int(parts[5]), None)
    elif not (_EXC_KEYS[0] in raw or _EXC_KEYS[1] in raw or _EXC_KEYS[2] in raw):
        return None
    if len(raw) >= MAX_LINE_BYTES or (_EVENT_WORD(raw) is None and _EXC_SEARCH(raw) is None):
        return None
    found = recognise_line(raw.decode("utf-8", "replace"), line_no, seq)
    if found is None:
        return None
    e = found[0]
    return (seq, line_no, e.t, KIND_CODE[e.kind], e.request_id, e.donor, e.offset, e.text_offset, e.tokens, e.message)


def _scan_lines(lines: list, line0: int, seq: int, clock) -> tuple[list[Row], int, int]:
    """Reference scan, line by line (what log_columns.scan_block_columns must equal): rows, next seq, unknown count."""
    rows: list[Row] = []
    unknown = 0
    line_no = line0
    for raw in lines:
        line_no += 1
        if raw is None:
            unknown += 1
            continue
        row = _scan_line(raw, line_no, seq, clock)
        if row is None:
            if raw and not raw.isspace():
                unknown += 1
            continue
        rows.append(row)
        seq += 1
    return rows, seq, unknown


def fast_message(kind: int, rid: str | None, offset: int | None, tokens: int | None) -> str:
    """The message of a fast-path row (stored as NULL: its text follows from the kind and fields)."""
    return _FAST_MESSAGE[kind].format(rid=rid, offset=offset, tokens=tokens)


def log_paths(paths: list[str | os.PathLike]) -> list[Path]:
    """Checked log paths (one-line errors for missing files and directories)."""
    out = []
    for p in map(Path, paths):
        shown = str(p) if len(str(p)) <= 200 else str(p)[:200] + "..."
        if not p.exists():
            raise ReplayFormatError(f"runtime log not found: {shown} (expected an existing log file)")
        if p.is_dir():
            raise ReplayFormatError(f"runtime log is a directory: {shown} (expected a log file)")
        refuse_special(p, "runtime log", "a log file, or a pipe", ReplayFormatError, allow_fifo=True)
        out.append(p)
    return out

