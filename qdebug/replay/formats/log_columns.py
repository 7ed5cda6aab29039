"""Vectorised recognition of a chunk of log lines with pyarrow (RE2 kernels): the common shapes become columns.

Same rows as `log_line._scan_lines` (the line-by-line reference): the fast shapes come out of RE2 passes over the
chunk's lines as Arrow columns, no Python object per line; lines that might be events in another shape (and fast
lines with an impossible date) go to `log_line._scan_line`.
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qdebug.vocab import EventKind

from . import log_line
from .log_line import KIND_CODE


def _lean_pool() -> None:
    """Arrow's allocations from jemalloc (else the system's): mimalloc, the default, keeps per-thread caches that
    grew the scan's memory by half as much again once chunks were recognised on two threads (measured at 10 M lines)."""
    if pa.default_memory_pool().backend_name != "mimalloc":
        return
    try:
        pa.set_memory_pool(pa.jemalloc_memory_pool())
    except NotImplementedError:  # a pyarrow built without jemalloc
        pa.set_memory_pool(pa.system_memory_pool())


_lean_pool()

# The fast shapes, one line each with its "\n" (each Arrow value is a line and its terminator), as two RE2 patterns
# without captures (RE2 matches those with its DFA, several times faster than extracting groups): the short shapes
# (`<stamp>Z LEVEL where: request_id=<id> start|first_token`, 5 words) and the long ones (10 words, with tokens and
# offset). Their fields are then cut out by splitting on spaces. Stricter than the reference's fast path (digits in
# the stamp) is safe: whatever is not taken here goes to the reference itself.
_HEAD = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.[0-9]{1,9})?Z (?:DEBUG|INFO|WARN|WARNING|ERROR|TRACE) "
_RID = r": request_id=[0-9A-Za-z-]{1,64} "
_NUM = r"[0-9]{1,18}"
_SHORT = (_HEAD + r"(?:VisualEncoder::encode_image" + _RID + r"start|Generator::decode" + _RID + r"first_token)\r?\n$")
_LONG = (_HEAD + r"(?:VisualEncoder::write_buffer" + _RID + r"wrote|TokenSynchronizer::stitch" + _RID + r"consumed) "
         + _NUM + r" tokens at offset " + _NUM + r"\r?\n$")
_EITHER = f"(?:{_SHORT})|(?:{_LONG})"
_WHERE = {b"VisualEncoder::encode_image:": EventKind.ENCODE_START, b"Generator::decode:": EventKind.FIRST_TOKEN,
          b"VisualEncoder::write_buffer:": EventKind.BUFFER_WRITE, b"TokenSynchronizer::stitch:": EventKind.SYNC}
_WHERE_KEYS = pa.array(list(_WHERE), pa.binary())
_WHERE_CODES = np.array([KIND_CODE[k] for k in _WHERE.values()], np.int64)
_EXC_KEYS = (b"TokenStreamDesync", b"VisualEmbeddingShapeMismatch", b"CrossAttentionIndexOutOfBounds")
_EVENT_WORD = r"wrote|encode_image|first|stitch|concat|consumed"
_MAYBE_EVENT = f"request_id.*(?:{_EVENT_WORD})|(?:{_EVENT_WORD}).*request_id"
_BLANK = r"^[ \t\r\x0b\x0c]*\n$"  # bytes.isspace() (or empty): neither an event nor an unknown line
_MAYBE_BLANK = re.compile(rb"\n[ \t\r\x0b\x0c\n]").search  # a quick look first: most chunks have none


# The events table's columns, as stored (one Parquet schema for every index part) and as a chunk's scan returns them.
EVENT_SCHEMA = pa.schema([("seq", pa.int64()), ("line", pa.int64()), ("t", pa.float64()), ("kind", pa.int8()),
                          ("rid", pa.string()), ("donor", pa.string()), ("offset", pa.int64()), ("text_offset", pa.int64()),
                          ("tokens", pa.int64()), ("message", pa.string())])


def scan_block_table(buf: bytes, stop: int, line0: int, seq: int, clock) -> tuple[pa.Table, int, int, int]:
    """The events of the lines in buf[1:stop] as an Arrow table (EVENT_SCHEMA, in line order), next seq, lines,
    unknown: the fast shapes stay columns end to end; only the rare other lines become Python rows."""
    nl = np.flatnonzero(np.frombuffer(buf, np.uint8, stop) == 10)
    lines = pa.Array.from_buffers(pa.binary(), len(nl) - 1, [None, pa.py_buffer((nl + 1).astype(np.int32)), pa.py_buffer(buf)])
    n_lines = len(lines)
    blank = (pc.sum(pc.match_substring_regex(lines, _BLANK)).as_py() or 0) if _MAYBE_BLANK(buf, 0, stop) else 0
    exc = _exception_lines(buf, stop, nl)
    fast, slow = [], [exc]
    # One RE2 pass over every line for both shapes; which shape a matched line is, a substring test on those alone.
    at = np.setdiff1d(_mask(pc.match_substring_regex(lines, _EITHER)), exc, assume_unique=True)  # an exception's name
    if len(at):  # (as the id) is the reference's to judge
        matched = lines.take(pa.array(at))
        is_long = pc.match_substring(matched, b" tokens at offset ").to_numpy(zero_copy_only=False)
        for long in (False, True):
            pick = is_long if long else ~is_long
            if pick.any():
                cols, ok = _fields(matched.filter(pa.array(pick)), long, clock)
                fast.append((at[pick][ok], cols))
                slow.append(at[pick][~ok])
    taken = np.concatenate([at for at, _ in fast]) if fast else np.empty(0, np.int64)
    # Other lines with a request id and an event word may be events of another shape: the reference decides.
    # (one RE2 pass for both conditions, cheaper than a substring pass and a second one over its hits)
    slow.append(np.setdiff1d(_mask(pc.match_substring_regex(lines, _MAYBE_EVENT)), taken, assume_unique=True))
    slow_rows = []
    for i in np.unique(np.concatenate(slow)).tolist():
        row = log_line._scan_line(buf[nl[i] + 1 : nl[i + 1]], i + line0 + 1, 0, clock)  # its seq is given below
        if row is not None:
            slow_rows.append((i, row))
    order = np.argsort(taken, kind="stable")
    at = taken[order]
    table = _fast_table(fast, order, at + line0 + 1)
    if slow_rows:
        where = np.array([i for i, _ in slow_rows], np.int64)
        cols = list(zip(*(row for _, row in slow_rows)))
        slow_table = pa.table([pa.array(np.zeros(len(where), np.int64)), pa.array(where + line0 + 1),
                               *(pa.array(c, f.type) for c, f in zip(cols[2:], list(EVENT_SCHEMA)[2:]))], schema=EVENT_SCHEMA)
        table = pa.concat_tables([table, slow_table])
        table = table.take(pc.sort_indices(table.column("line")))  # two sorted runs in line order
    n = table.num_rows
    table = table.set_column(0, "seq", pa.array(np.arange(seq, seq + n, dtype=np.int64)))
    return table, seq + n, n_lines, n_lines - blank - n


def _mask(flags: pa.BooleanArray) -> np.ndarray:
    """Positions of the true values."""
    return np.flatnonzero(flags.to_numpy(zero_copy_only=False))


def _exception_lines(buf: bytes, stop: int, nl: np.ndarray) -> np.ndarray:
    """Which lines name an exception (rare; found by memchr-fast bytes.find rather than a pass per line)."""
    pos = []
    for key in _EXC_KEYS:
        i = buf.find(key, 0, stop)
        while i >= 0:
            pos.append(i)
            i = buf.find(key, i + 1, stop)
    return np.unique(np.searchsorted(nl, pos) - 1) if pos else np.empty(0, np.int64)


def _fields(lines: pa.BinaryArray, long: bool, clock) -> tuple[list, np.ndarray]:
    """The columns (t, kind, rid, tokens, offset) of fast-shape lines and which of them hold (a date, an id that is
    not dashes only: as the reference decides)."""
    parts = pc.split_pattern(lines, b" ")
    stamp = pc.list_element(parts, 0)
    rid = pc.binary_slice(pc.list_element(parts, 3), 11, 11 + 64)  # "request_id=" cut off
    t = _times(pc.binary_slice(stamp, 0, 19), pc.binary_slice(stamp, 20, -1), clock)
    ok = ~np.isnan(t) & ~pc.match_substring_regex(rid, r"^-+$").to_numpy(zero_copy_only=False)
    keep = pa.array(ok)
    kind = _WHERE_CODES[pc.index_in(pc.list_element(parts, 2).filter(keep), value_set=_WHERE_KEYS).to_numpy()]
    if long:
        tokens = _ints(pc.list_element(parts, 5).filter(keep))
        offset = _ints(pc.list_element(parts, 9).filter(keep))
    else:
        tokens = offset = pa.nulls(int(ok.sum()), pa.int64())
    return [t[ok], kind, rid.filter(keep), tokens, offset], ok


def _fast_table(fast: list, order: np.ndarray, lines: np.ndarray) -> pa.Table:
    """The fast rows as an EVENT_SCHEMA table, the short and long shapes' rows merged in line order (seq set later)."""
    n = len(order)
    if not n:
        return EVENT_SCHEMA.empty_table()

    def col(k):
        return [c[k] for _, c in fast]
    take = pa.array(order)
    nulls = pa.nulls(n, pa.int64())
    return pa.table([
        pa.array(np.zeros(n, np.int64)), pa.array(lines.astype(np.int64)), pa.array(np.concatenate(col(0))[order]),
        pa.array(np.concatenate(col(1))[order].astype(np.int8)), pc.cast(pa.concat_arrays(col(2)).take(take), pa.string()),
        pa.nulls(n, pa.string()), pa.concat_arrays(col(4)).take(take), nulls, pa.concat_arrays(col(3)).take(take),
        pa.nulls(n, pa.string()),
    ], schema=EVENT_SCHEMA)


def _ints(digits: pa.Array) -> pa.Array:
    """Whole numbers from their digits (the last word of a line still has its "\r\n")."""
    return pc.cast(pc.utf8_rtrim(pc.cast(digits, pa.string()), characters="\r\n"), pa.int64())


def _times(seconds_stamps: pa.Array, fracs: pa.Array, clock) -> np.ndarray:
    """Epoch seconds (NaN where the stamp is no date): each distinct second and fraction computed once, in Python,
    exactly as the reference does (`t + int(frac) / 10 ** len(frac)`), then spread over the column."""
    cache, seconds = clock
    enc = pc.dictionary_encode(seconds_stamps)
    per_second = np.array([_or_nan(cache.get(s, -1.0), s, seconds) for s in enc.dictionary.to_pylist()], np.float64)
    t = per_second[enc.indices.to_numpy()]
    fenc = pc.dictionary_encode(fracs)  # "" where the stamp has no fraction
    per_frac = np.array([int(f) / 10 ** len(f) if f else 0.0 for f in fenc.dictionary.to_pylist()], np.float64)
    return t + per_frac[fenc.indices.to_numpy()]


def _or_nan(t, stamp: bytes, seconds) -> float:
    if t == -1.0:
        t = seconds(stamp)
    return np.nan if t is None else t
