"""Recognition of a chunk of log lines, column-wise: known shapes become Arrow columns, no Python object per line.

Same rows as `log_line._scan_lines` (the line-by-line reference): the common shapes (encode, write, sync, first
token) and the rare ones services print (overwrite, desync, shape mismatch, index out of bounds) come out as columns;
lines that might be events in another shape (or hold an impossible date) go to `log_line._scan_line`.
Two implementations of the same sorting, held to the reference by the same tests: one native pass over the chunk
(`_logscan.c`, built by `pip install -e .`: 0.2 s of CPU per million lines, against 0.8 s) and, where it is not
built, RE2 passes over the chunk's lines (pyarrow's kernels) whose patterns below are the shapes' specification.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qdebug.vocab import EventKind

from . import log_line
from .log_line import KIND_CODE
from .log_partials import Fold, Summary, summarise, unfolded


def _lean_pool() -> None:
    """Arrow's allocations from the system's malloc: mimalloc, the default, keeps per-thread caches that grew the scan's
    peak by a third once chunks were recognised on two threads, and jemalloc kept 30 MB after the scan that glibc's
    malloc_trim hands back (measured at 1 M lines: peak 167 / 230 / 173 MiB, after the scan 113 / 115 / 146 MiB).
    The pool is process-wide; in qdebug only the log index uses Arrow."""
    if pa.default_memory_pool().backend_name != "mimalloc":
        return
    pa.set_memory_pool(pa.system_memory_pool())


_lean_pool()

try:  # the native pass over a chunk (`pip install -e .` builds it); without it the RE2 passes alone give the same rows
    import qdebug.replay.formats._logscan as _built
except ImportError:
    _built = None
_native = _built

# The fast shapes, one line each with its "\n" (each Arrow value is a line and its terminator), as two RE2 patterns
# without captures (RE2 matches those with its DFA, several times faster than extracting groups): the short shapes
# (`<stamp>Z LEVEL where: request_id=<id> start|first_token`, 5 words) and the long ones (10 words, with tokens and
# offset). Their fields are then cut out by splitting on spaces. Stricter than the reference's fast path (digits in
# the stamp) is safe: whatever is not taken here goes to the reference itself.
_HEAD = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.[0-9]{1,9})?Z (?:DEBUG|INFO|WARN|WARNING|ERROR|TRACE) "
# Ids and numbers are matched unbounded and their lengths checked after (at most _ID_MAX characters, _DIGITS_MAX
# digits, as the reference allows): RE2 compiles a pattern per call, and bounded repeats made it ten times larger.
_ID_MAX, _DIGITS_MAX = 64, 18
_RID = r": request_id=[0-9A-Za-z-]+ "
_NUM = r"[0-9]+"
_SHORT = (_HEAD + r"(?:VisualEncoder::encode_image" + _RID + r"start|Generator::decode" + _RID + r"first_token)\r?\n$")
_LONG = (_HEAD + r"(?:VisualEncoder::write_buffer" + _RID + r"wrote|TokenSynchronizer::stitch" + _RID + r"consumed) "
         + _NUM + r" tokens at offset " + _NUM + r"\r?\n$")
_EITHER = f"(?:{_SHORT})|(?:{_LONG})"
_WHERE = {b"VisualEncoder::encode_image:": EventKind.ENCODE_START, b"Generator::decode:": EventKind.FIRST_TOKEN,
          b"VisualEncoder::write_buffer:": EventKind.BUFFER_WRITE, b"TokenSynchronizer::stitch:": EventKind.SYNC}
_WHERE_KEYS = pa.array(list(_WHERE), pa.binary())
_WHERE_CODES = np.array([KIND_CODE[k] for k in _WHERE.values()], np.int64)
_EXC_NAMES = "TokenStreamDesync|VisualEmbeddingShapeMismatch|CrossAttentionIndexOutOfBounds"
_ODD_RID = f"^-+$|{_EXC_NAMES}"  # ids the reference's fast path leaves to its general recogniser
_EVENT_WORD = r"wrote|encode_image|first|stitch|concat|consumed"
# Lines that may be events of another shape: a request id and an event word, or an exception's name.
_CANDIDATE = f"request_id.*(?:{_EVENT_WORD})|(?:{_EVENT_WORD}).*request_id|{_EXC_NAMES}"
# The rare shapes, as the services we know print them (seed 000; tests/logs/log_synth.py): overwrites, desyncs and
# errors, ASCII only, each (kind, RE2 pattern, column -> group). `m` is the message (the line after its level),
# `s` and `f` the stamp's seconds and fraction. Any other spelling of them is left to the general recogniser.
_RARE_HEAD = (r"^(?P<s>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(?P<f>[0-9]{1,9}))?Z "
              r"(?:DEBUG|INFO|WARN|WARNING|ERROR|TRACE) (?P<m>")
_ID = r"[0-9A-Za-z-]+"


def _opt_rid(group: str) -> str:
    return r"(?: \(request_id=(?P<" + group + r">" + _ID + r")\))?"


# (kind, the shape after the level (its groups named uniquely: one RE2 pass takes them all), the group that took
# something when the line is of this kind, column -> group).
_RARE = (
    (EventKind.BUFFER_OVERWRITE,
     r"VisualEncoder::write_buffer: request_id=(?P<w>" + _ID + r") overwrote buffer at offset (?P<o>" + _NUM
     + r")(?: with (?P<n>" + _NUM + r") tokens)? \(previously (?P<v>" + _ID + r")\)", "w",
     {"donor": "w", "rid": "v", "offset": "o", "tokens": "n"}),
    (EventKind.DESYNC,
     r"TokenStreamDesync[A-Za-z]*: visual token offset (?P<do>" + _NUM + r") differs from textual offset (?P<dx>"
     + _NUM + r")" + _opt_rid("dr"), "do",
     {"offset": "do", "rid": "dr", "text_offset": "dx"}),
    (EventKind.INDEX_OUT_OF_BOUNDS,
     r"CrossAttentionIndexOutOfBounds[A-Za-z]*: token index (?P<io>" + _NUM + r") exceeds sequence length (?P<in>"
     + _NUM + r")" + _opt_rid("ir"), "io",
     {"offset": "io", "rid": "ir", "tokens": "in"}),
    (EventKind.SHAPE_MISMATCH,
     r"(?P<sm>VisualEmbeddingShapeMismatch)[A-Za-z]*:[ -~]*?[!-~]" + _opt_rid("sr"), "sm",
     {"rid": "sr"}),
)
# The kinds the native pass's shapes stand for: the common ones in _WHERE's order, then the rare ones in _RARE's.
_NATIVE_KINDS = np.array([*_WHERE_CODES, *(KIND_CODE[kind] for kind, *_ in _RARE)], np.int8).tobytes()
_RARE_SHAPES = _RARE_HEAD + "(?:" + "|".join(f"(?:{shape})" for _, shape, _, _ in _RARE) + r"))\r?\n$"
_BLANK = r"^[ \t\r\x0b\x0c]*\n$"  # bytes.isspace() (or empty): neither an event nor an unknown line
_SPACE_BYTE = np.zeros(256, bool)
_SPACE_BYTE[list(b" \t\r\x0b\x0c\n")] = True


# The events table's columns, as stored (one Parquet schema for every index part) and as a chunk's scan returns them.
EVENT_SCHEMA = pa.schema([("seq", pa.int64()), ("line", pa.int64()), ("t", pa.float64()), ("kind", pa.int8()),
                          ("rid", pa.string()), ("donor", pa.string()), ("offset", pa.int64()), ("text_offset", pa.int64()),
                          ("tokens", pa.int64()), ("message", pa.string())])


def scan_block_table(buf: bytes | bytearray, stop: int, line0: int, seq: int, clock) -> tuple[pa.Table, int, int, int, Summary]:
    """The events of the lines in buf[1:stop] as an Arrow table (EVENT_SCHEMA, in line order), next seq, lines,
    unknown, and the chunk's summary for the verdict SQL (log_partials): the common and the rare shapes stay columns
    end to end; only lines of no known shape become Python rows."""
    sort = _native_parts if _native is not None else _arrow_parts
    starts, n_lines, blank, parts, slow, fold = sort(buf, stop, clock)
    slow_rows = []
    for i in np.unique(np.concatenate(slow)).tolist() if slow else ():
        row = log_line._scan_line(bytes(buf[starts[i] : starts[i + 1] - 1]), i + line0 + 1, 0, clock)  # its seq is given below
        if row is not None:
            slow_rows.append((i, row))
    where = np.array([i for i, _ in slow_rows], np.int64)
    if slow_rows:
        cols = list(zip(*(row for _, row in slow_rows)))
        parts.append((where, [pa.array(c, f.type) for c, f in zip(cols[2:], list(EVENT_SCHEMA)[2:])]))
    table = _in_line_order(parts, line0)
    n = table.num_rows
    table = table.set_column(0, "seq", pa.array(np.arange(seq, seq + n, dtype=np.int64)))
    summary = unfolded(table) if fold is None else summarise(table, seq, line0, fold, where)
    return table, seq + n, n_lines, n_lines - blank - n, summary


def use_native(on: bool) -> bool:
    """Recognise with the native pass (True, when it is built) or with the RE2 passes alone; whether it was on before.
    Both give the reference's rows: the tests run each."""
    global _native
    before = _native is not None
    _native = _built if on else None
    return before


def native_built() -> bool:
    """Whether the native pass (qdebug/replay/formats/_logscan.c, built by `pip install -e .`) is there."""
    return _built is not None


def _native_parts(buf: bytes | bytearray, stop: int, clock) -> tuple[np.ndarray, int, int, list, list, Fold | None]:
    """(line starts, lines, blank lines, parts of (line indices, columns t .. message), indices for the reference,
    the common-shape rows folded by request id): one native pass sorts the lines and cuts every known shape's fields,
    in line order."""
    (n_lines, blank, starts, at, kind, run_of, run_start, frac, rid, donor, message, offset, text_offset, tokens,
     reference, first, write, stitch) = _native.scan_block(buf, stop, _NATIVE_KINDS, log_line.MAX_LINE_BYTES)
    starts = np.frombuffer(starts, np.int32)
    at = np.frombuffer(at, np.int64)
    parts, slow, fold = [], [np.frombuffer(reference, np.int64)], None
    if len(at):
        # a stamp's seconds once per run of rows in the same second, in Python as the reference computes them
        cache, seconds = clock
        stamps = (bytes(buf[r : r + 19]) for r in np.frombuffer(run_start, np.int64).tolist())
        per_run = np.array([_or_nan(cache.get(s, -1.0), s, seconds) for s in stamps], np.float64)
        t = per_run[np.frombuffer(run_of, np.int32)] + np.frombuffer(frac, np.float64)
        n = len(at)
        cols = [t, np.frombuffer(kind, np.int8), *(_native_strings(n, *c) for c in (rid, donor)),
                *(_native_ints(*c) for c in (offset, text_offset, tokens)), _native_strings(n, *message)]
        ok = ~np.isnan(t)  # an impossible date: the reference's to judge
        if ok.all():
            fold = Fold(at, cols[2], np.frombuffer(offset[0], np.int64),
                        *(np.frombuffer(x, np.int32) for x in (first, write, stitch)))
        else:  # the fold counted rows the reference now judges: the chunk goes unfolded (all raw)
            keep = pa.array(ok)
            cols = [c[ok] if isinstance(c, np.ndarray) else c.filter(keep) for c in cols]
            slow.append(at[~ok])
            at = at[ok]
        parts.append((at, cols))
    return starts, n_lines, blank, parts, slow, fold


def _native_strings(n: int, offsets: bytes, data: bytes, valid: bytes) -> pa.Array:
    """A string column the native pass cut out (null where not valid)."""
    mask = np.frombuffer(valid, np.bool_)
    nulls = n - int(np.count_nonzero(mask))
    bitmap = None if not nulls else pa.py_buffer(np.packbits(mask, bitorder="little"))
    return pa.Array.from_buffers(pa.string(), n, [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=nulls)


def _native_ints(values: bytes, valid: bytes) -> pa.Array:
    """An int64 column the native pass cut out (null where not valid)."""
    return pa.array(np.frombuffer(values, np.int64), pa.int64(), mask=~np.frombuffer(valid, np.bool_))


def _arrow_parts(buf: bytes | bytearray, stop: int, clock) -> tuple[np.ndarray, int, int, list, list, None]:
    """As _native_parts, with RE2 passes over the chunk's lines alone (when the native pass is not built): no fold."""
    nl = np.flatnonzero(np.frombuffer(buf, np.uint8, stop) == 10)
    starts = (nl + 1).astype(np.int32)
    lines = pa.Array.from_buffers(pa.binary(), len(nl) - 1, [None, pa.py_buffer(starts), pa.py_buffer(buf)])
    n_lines = len(lines)
    blank = _blank_lines(buf, stop, nl, lines)
    parts, slow = [], []  # (line indices, EVENT_SCHEMA columns after seq and line), indices for the reference
    # One RE2 pass over every line finds the candidates: a request id and an event word, or an exception's name (every
    # line of a known shape is one). The shapes are then matched on the candidates alone: most lines of a log are noise.
    is_cand = pc.match_substring_regex(lines, _CANDIDATE)
    cand_at = _mask(is_cand)
    if len(cand_at):
        cand = lines.filter(is_cand)
        # the common shapes: one RE2 pass for all four, their fields cut out by splitting on spaces
        is_fast = pc.match_substring_regex(cand, _EITHER)
        fast = is_fast.to_numpy(zero_copy_only=False)
        if fast.any():
            cols, ok = _fields(cand.filter(is_fast), clock)
            parts.append((cand_at[fast][ok], cols))
            slow.append(cand_at[fast][~ok])
        # the rare shapes (overwrites, desyncs, errors) as columns too; whatever is left, the reference decides
        if not fast.all():
            rest_at = cand_at[~fast]
            rare, left = _rare_shapes(cand.filter(pc.invert(is_fast)), clock)
            parts += [(rest_at[i], cols) for i, cols in rare]
            slow.append(rest_at[left])
    return starts, n_lines, blank, parts, slow, None


def _blank_lines(buf: bytes | bytearray, stop: int, nl: np.ndarray, lines: pa.BinaryArray) -> int:
    """How many lines are empty or whitespace only (only lines starting with whitespace are looked at)."""
    maybe = np.flatnonzero(_SPACE_BYTE[np.frombuffer(buf, np.uint8, stop)[nl[:-1] + 1]])
    if not len(maybe):
        return 0
    return int(pc.sum(pc.match_substring_regex(lines.take(pa.array(maybe)), _BLANK)).as_py() or 0)


def _in_line_order(parts: list, line0: int) -> pa.Table:
    """One EVENT_SCHEMA table (seq set later) from parts of (line indices, columns t..message), rows in line order."""
    parts = [(at, cols) for at, cols in parts if len(at)]
    if not parts:
        return EVENT_SCHEMA.empty_table()
    at = np.concatenate([at for at, _ in parts])
    order = np.argsort(at, kind="stable")
    n = len(at)
    columns = [pa.array(np.zeros(n, np.int64)), pa.array(at[order] + line0 + 1)]
    take = pa.array(order) if len(parts) > 1 else None  # each part's lines are in order already
    for k, field in enumerate(list(EVENT_SCHEMA)[2:]):
        col = pa.concat_arrays([_as(cols[k], field.type) for _, cols in parts])
        columns.append(col if take is None else col.take(take))
    return pa.table(columns, schema=EVENT_SCHEMA)


def _as(values, typ: pa.DataType) -> pa.Array:
    """A column of the given Arrow type from numpy, Arrow or null-count values."""
    if isinstance(values, int):
        return pa.nulls(values, typ)
    if isinstance(values, np.ndarray):
        return pa.array(values.astype(typ.to_pandas_dtype()), typ)
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    return values if values.type == typ else pc.cast(values, typ)


def _mask(flags: pa.BooleanArray) -> np.ndarray:
    """Positions of the true values."""
    return np.flatnonzero(flags.to_numpy(zero_copy_only=False))


def _fields(lines: pa.BinaryArray, clock) -> tuple[list, np.ndarray]:
    """The columns (t .. message) of common-shape lines and which of them hold: a date, an id of at most _ID_MAX
    characters that is neither dashes only nor hiding an exception's name, numbers of at most _DIGITS_MAX digits
    (the other lines are the reference's to judge)."""
    parts = pc.split_pattern(lines, b" ")
    long = pc.equal(pc.list_value_length(parts), 10).to_numpy(zero_copy_only=False)  # with tokens and offset
    stamp = pc.list_element(parts, 0)
    rid = pc.binary_slice(pc.list_element(parts, 3), 11, 1 << 30)  # "request_id=" cut off (pyarrow 26 fails without a stop)
    t = _times(pc.binary_slice(stamp, 0, 19), pc.binary_slice(stamp, 20, -1), clock)
    ok = ~np.isnan(t) & _at_most(rid, _ID_MAX) & ~pc.match_substring_regex(rid, _ODD_RID).to_numpy(zero_copy_only=False)
    if long.any():
        numbers = parts.filter(pa.array(long))
        digits = [_digits(pc.list_element(numbers, k)) for k in (5, 9)]
        ok[long] &= _at_most(digits[0], _DIGITS_MAX) & _at_most(digits[1], _DIGITS_MAX)
    keep = pa.array(ok)
    n = int(ok.sum())
    kind = _WHERE_CODES[pc.index_in(pc.list_element(parts, 2).filter(keep), value_set=_WHERE_KEYS).to_numpy()]
    tokens = offset = n
    if long.any():
        kept = pa.array(ok[long])
        tokens, offset = (_spread(pc.cast(d.filter(kept), pa.int64()), long & ok).filter(keep) for d in digits)
    return [t[ok], kind, rid.filter(keep), n, offset, n, tokens, n], ok


def _at_most(values: pa.Array, most: int) -> np.ndarray:
    """Which values are at most `most` long."""
    return pc.less_equal(pc.binary_length(values), most).to_numpy(zero_copy_only=False)


def _spread(values: pa.Array, where: np.ndarray) -> pa.Array:
    """values (no nulls) placed at the true positions of where, nulls elsewhere."""
    full = np.zeros(len(where), np.int64)
    full[where] = values.to_numpy()
    return pa.array(full, pa.int64(), mask=~where)


def _rare_shapes(lines: pa.BinaryArray, clock) -> tuple[list, np.ndarray]:
    """The rare shapes among candidate lines as columns: [(positions in lines, columns t .. message)], positions left
    for the reference (no shape of ours, an impossible date, an id hiding an exception's name, a line too long)."""
    short = pc.less(pc.binary_length(lines), log_line.MAX_LINE_BYTES + 1)  # raw line (no "\n") < MAX_LINE_BYTES
    got = pc.extract_regex(lines, _RARE_SHAPES)
    hit = pc.and_(got.is_valid(), short).to_numpy(zero_copy_only=False)
    if not hit.any():
        return [], np.arange(len(lines))
    at = np.flatnonzero(hit)
    got = got.filter(pa.array(hit))
    group = {name: got.field(name) for name in got.type.names}
    t = _times(group["s"], group["f"], clock)
    taken = ~np.isnan(t)
    out = []
    for kind, _shape, marker, names in _RARE:
        ok = taken & (pc.binary_length(group[marker]).to_numpy() > 0)
        for column, name in names.items():
            ok &= _at_most(group[name], _ID_MAX if column in ("rid", "donor") else _DIGITS_MAX)
        if kind == EventKind.BUFFER_OVERWRITE:  # an id naming an exception makes the line the exception's
            for name in ("w", "v"):
                ok &= ~pc.match_substring_regex(group[name], _EXC_NAMES).to_numpy(zero_copy_only=False)
        elif kind == EventKind.SHAPE_MISMATCH:  # its id is the line's only request_id, if any
            mentions = pc.count_substring(lines.filter(pa.array(hit)), b"request_id").to_numpy()
            ok &= mentions == (pc.binary_length(group["sr"]).to_numpy() > 0)
        if not ok.any():
            continue
        keep = pa.array(ok)
        n = int(ok.sum())

        def col(column: str, ints: bool = False):
            name = names.get(column)
            if name is None:
                return n
            values = group[name].filter(keep)
            return _ints(values) if ints else pc.if_else(pc.equal(pc.binary_length(values), 0), pa.scalar(None, pa.binary()), values)

        out.append((at[ok], [t[ok], np.full(n, KIND_CODE[kind], np.int8), col("rid"), col("donor"), col("offset", True),
                             col("text_offset", True), col("tokens", True), pc.binary_slice(group["m"].filter(keep), 0, 500)]))
    done = np.concatenate([a for a, _ in out]) if out else np.empty(0, np.int64)
    return out, np.setdiff1d(np.arange(len(lines)), done, assume_unique=True)


def _digits(values: pa.Array) -> pa.Array:
    """A number's digits as text (the last word of a line still has its "\r\n"; none: "")."""
    return pc.utf8_rtrim(pc.cast(values, pa.string()), characters="\r\n")


def _ints(digits: pa.Array) -> pa.Array:
    """Whole numbers from their digits (none: null)."""
    text = _digits(digits)
    return pc.cast(pc.if_else(pc.equal(pc.utf8_length(text), 0), pa.scalar(None, pa.string()), text), pa.int64())


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
