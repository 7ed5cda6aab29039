"""One line's event row, the line-by-line way: the fast path for the common shapes, the general recogniser for the
rest. The reference the column-wise scan (`log_columns`) must equal, and its fallback for rare shapes."""

from __future__ import annotations

import re
from collections.abc import Callable

from qdebug.vocab import EVENT_KINDS, EventKind

from .runtime_log import MAX_LINE_BYTES, _prefix, recognise_line

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


def _seconds_cache() -> tuple[dict, Callable[[bytes], float | None]]:
    """(cache, fill): epoch seconds of `YYYY-MM-DDTHH:MM:SS`, cached per second (a log repeats each many times)."""
    cache: dict[bytes, float | None] = {}

    def seconds(stamp: bytes) -> float | None:
        if len(cache) > 200_000:
            cache.clear()
        # a stamp holding a non-ASCII byte (a BOM, a torn line) is no time of the fast shapes: the general recogniser judges the line
        t = cache[stamp] = _prefix(stamp.decode("ascii"))[0] if stamp.isascii() else None
        return t

    return cache, seconds


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
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:  # not UTF-8: unknown (README), never an id with U+FFFD in it (a phantom request)
        return None
    found = recognise_line(text, line_no, seq)
    if found is None:
        return None
    e = found[0]
    return (seq, line_no, e.t, KIND_CODE[e.kind], e.request_id, e.donor, e.offset, e.text_offset, e.tokens, e.message)


def _scan_lines(lines: list, line0: int, seq: int, clock) -> tuple[list[Row], int, int]:
    """Reference scan, line by line (what log_columns.scan_block_table must equal): rows, next seq, unknown count."""
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
