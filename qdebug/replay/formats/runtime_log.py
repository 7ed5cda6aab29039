"""Stream parser for Qwen runtime logs: recognised lines become the Events of a Batch."""

from __future__ import annotations

import datetime as _dt
import io
import os
import re
import zlib
from collections.abc import Iterable, Iterator
from functools import partial
from pathlib import Path

from qdebug.errors import ReplayFormatError
from qdebug.input_files import require_streamable
from qdebug.replay.batch import Batch, BatchRequest, Event
from qdebug.vocab import EventKind

# journalctl's short format has no year; a fixed one keeps parses reproducible.
JOURNAL_YEAR = 2024
# Longer lines are not examined (counted as unknown, the rest skipped): one runaway line cannot fill memory
# or time.
MAX_LINE_BYTES = 1 << 20
GZIP_MAGIC = b"\x1f\x8b"
# Events keep at most this much of their line: memory follows events, not line length.
MAX_MESSAGE_CHARS = 500

_DESYNC_KEY = "TokenStreamDesync"
_SHAPE_KEY = "VisualEmbeddingShapeMismatch"
_OOB_KEY = "CrossAttentionIndexOutOfBounds"
_RID_KEY = "request_id"
_B_RID, _B_DESYNC, _B_SHAPE, _B_OOB = (k.encode() for k in (_RID_KEY, _DESYNC_KEY, _SHAPE_KEY, _OOB_KEY))

_ISO_RE = re.compile(
    r"\s*\[?(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?"
    r"(?:\s?(Z|z|[+-]\d{2}(?::?\d{2})?))?\]?"
    # journalctl -o short-iso adds "host ident[pid]:"; the [pid] keeps "ERROR Foo:" from looking like one.
    r"(?:\s+[^\s\[]+\s+[^\s:\[]+\[\d+\]:)?"
)
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_JOURNAL_RE = re.compile(
    r"\s*(" + "|".join(_MONTHS) + r")\s+(\d{1,2})\s+(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
    r"(?:\s+[^\s\[]+\s+[^\s:\[]+(?:\[\d+\])?:)?"
)
_LEVELS = r"(?:DEBUG|INFO|WARN(?:ING)?|ERROR|CRITICAL|FATAL|TRACE)"
_LEVEL_RE = re.compile(r"\s*(?:\[" + _LEVELS + r"\]|" + _LEVELS + r"\b):?\s*", re.I)

# Every quantifier that can run to the end of a line is bounded or anchored: each regex is linear in the line.
# A whole number: "1e400" or "3.5" is no offset, and int() never sees thousands of digits. Ids are <= 256 chars.
_NUM = r"(\d{1,18})(?!\w|\.\d)"
_RID_RE = re.compile(r"""request_id\s*[=:]\s*(?:"([^"\n]{0,256})"|'([^'\n]{0,256})'|([^\s,;)\]}"']{1,256}))""")
_WROTE_RE = re.compile(r"\bwrote\s+(?:" + _NUM + r"\s+)?tokens?\b(?:\s+at\s+offset\s+" + _NUM + ")?")
_OVERWROTE_RE = re.compile(
    r"\boverwrote\s+(?:the\s+)?(?:visual\s+)?buffer(?:\s+at\s+offset\s+" + _NUM + ")?"
    r"(?:\s+with\s+" + _NUM + r"\s+tokens?)?"
    r"\s*\(\s*previously\s+(?:(?:by\s+)?request_id\s*[=:]\s*)?"
    r"(?:\"([^\"\n]{0,256})\"|'([^'\n]{0,256})'|([^\s)\"',]{1,256}))\s*\)"
)
# The exception names as logged; the lookbehind keeps longer identifiers that merely end in one out.
_EXC_RE = re.compile(r"(?<!\w)(" + "|".join((_DESYNC_KEY, _SHAPE_KEY, _OOB_KEY)) + r")")
_WITH_TOKENS_RE = re.compile(r"\bwith\s+" + _NUM + r"\s+tokens?\b")
# Searched only after the first "encode_image" (a `encode_image\b.*\bstart` search is quadratic in the line).
_ENCODE_RE = re.compile(r"\bstart(?:ed|ing)?\b")
_STITCH_RE = re.compile(r"(?:stitch|concat)|\bconsumed\b")
_TOKENS_RE = re.compile(r"\b" + _NUM + r"\s+(?:visual\s+)?tokens?\b")
_OFFSET_RE = re.compile(r"\boffset(?:\s*[=:])?\s*" + _NUM)
_FIRST_TOKEN_RE = re.compile(r"\bfirst[_ ]token\b")
_VISUAL_OFFSET_RE = re.compile(r"visual\s+(?:token\s+)?offset\s+" + _NUM)
_TEXT_OFFSET_RE = re.compile(r"text(?:ual)?\s+(?:token\s+)?offset\s+" + _NUM)
_INDEX_RE = re.compile(r"token\s+index\s+" + _NUM)
_SEQLEN_RE = re.compile(r"sequence\s+length\s+" + _NUM)

_EPOCH_ORDINAL = _dt.date(1970, 1, 1).toordinal()
_day_cache: dict[tuple[int, int, int], int] = {}


def _day_seconds(year: int, month: int, day: int) -> int:
    """Seconds from the epoch to midnight UTC of a date (cached: logs repeat the same few days)."""
    key = (year, month, day)
    secs = _day_cache.get(key)
    if secs is None:
        secs = (_dt.date(year, month, day).toordinal() - _EPOCH_ORDINAL) * 86400
        if len(_day_cache) < 4096:
            _day_cache[key] = secs
    return secs


def _clock(day: int, h: str, mi: str, s: str, frac: str | None) -> float | None:
    """Seconds since the epoch for a time of day, or None when the fields are out of range."""
    hh, mm, ss = int(h), int(mi), int(s)
    if hh > 23 or mm > 59 or ss > 60:
        return None
    t = day + hh * 3600 + mm * 60 + ss
    return t + int(frac) / 10 ** len(frac) if frac else float(t)


def _tz_seconds(tz: str | None) -> int | None:
    """A `Z` / `+05:30` / `-0800` / `+05` suffix as seconds east of UTC (no suffix: UTC); None when out of range."""
    if not tz or tz in "Zz":
        return 0
    digits = tz[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:4]) if len(digits) >= 4 else 0
    if hours > 14 or minutes > 59:  # real zones run from -12:00 to +14:00: "+99:99" is no zone
        return None
    secs = hours * 3600 + minutes * 60
    return -secs if tz[0] == "-" else secs


def _prefix(text: str) -> tuple[float | None, int]:
    """The line's timestamp (epoch seconds or None) and where its message starts (0: no timestamp, no level)."""
    t: float | None = None
    pos = 0
    m = _ISO_RE.match(text)
    if m is not None:
        y, mo, d, h, mi, s, frac, tz = m.groups()
        try:
            clock = _clock(_day_seconds(int(y), int(mo), int(d)), h, mi, s, frac)
        except ValueError:  # e.g. month 13: not a timestamp after all
            clock = None
        zone = _tz_seconds(tz)
        if clock is not None and zone is not None:
            t, pos = clock - zone, m.end()
    elif text[:1].isalpha() or text[:1].isspace():
        m = _JOURNAL_RE.match(text)
        if m is not None:
            mon, d, h, mi, s, frac = m.groups()
            try:
                clock = _clock(_day_seconds(JOURNAL_YEAR, _MONTHS.index(mon) + 1, int(d)), h, mi, s, frac)
            except ValueError:
                clock = None
            if clock is not None:
                t, pos = clock, m.end()
    lm = _LEVEL_RE.match(text, pos)
    if lm is not None:
        pos = lm.end()
    return t, pos


def split_prefix(text: str) -> tuple[float | None, str]:
    """The line's timestamp (epoch seconds or None) and its message with timestamp and level removed."""
    t, pos = _prefix(text)
    return t, text[pos:].strip()[:MAX_MESSAGE_CHARS]


def _rid(m: re.Match | None) -> str | None:
    """The request id a _RID_RE match captured (None for no match or an empty id)."""
    if m is None:
        return None
    value = m.group(1) if m.group(1) is not None else m.group(2) if m.group(2) is not None else m.group(3)
    value = value.strip()
    return value or None


def _find_rid(text: str) -> str | None:
    """The first request id in a line (match at each `request_id` occurrence: cheaper than a search)."""
    i = text.find(_RID_KEY)
    while i >= 0:
        rid = _rid(_RID_RE.match(text, i))
        if rid is not None:
            return rid
        i = text.find(_RID_KEY, i + 1)
    return None


def _int(value: str | None) -> int | None:
    """An optional captured integer."""
    return int(value) if value is not None else None


def _exception_event(text: str, line: int | None, seq: int) -> tuple[Event, tuple[str, ...]] | None:
    """A desync / shape-mismatch / index-out-of-bounds line as an Event (None for traceback noise)."""
    m = _EXC_RE.search(text)
    if m is None:
        return None
    t, pos = _prefix(text)
    if pos == 0 and (text[:1].isspace() or text[m.start() - 1 : m.start()] == "."):
        # A bare indented line ("  raise Name(...)") or bare "pkg.errors.Name: ..." is traceback output
        # repeating an error the runtime already logged; counting it would report the error twice.
        return None
    msg = text[pos:].strip()[:MAX_MESSAGE_CHARS]
    rid = _find_rid(text)
    ids = (rid,) if rid else ()
    name = m.group(1)
    if name == _DESYNC_KEY:
        vm, tm = _VISUAL_OFFSET_RE.search(text), _TEXT_OFFSET_RE.search(text)
        event = Event(
            EventKind.DESYNC, rid, t=t, seq=seq, line=line, message=msg,
            offset=_int(vm and vm.group(1)), text_offset=_int(tm and tm.group(1)),
        )
    elif name == _SHAPE_KEY:
        event = Event(EventKind.SHAPE_MISMATCH, rid, t=t, seq=seq, line=line, message=msg)
    else:
        im, sm = _INDEX_RE.search(text), _SEQLEN_RE.search(text)
        event = Event(
            EventKind.INDEX_OUT_OF_BOUNDS, rid, t=t, seq=seq, line=line, message=msg,
            offset=_int(im and im.group(1)), tokens=_int(sm and sm.group(1)),
        )
    return event, ids


def recognise_line(text: str, line: int | None = None, seq: int = 0) -> tuple[Event, tuple[str, ...]] | None:
    """The Event one log line describes and the request ids it mentions, or None for an unknown line."""
    if _DESYNC_KEY in text or _SHAPE_KEY in text or _OOB_KEY in text:
        found = _exception_event(text, line, seq)
        if found is not None:
            return found
    if _RID_KEY not in text:
        return None
    om = _OVERWROTE_RE.search(text) if "overwrote" in text else None
    if om is not None:
        # The victim may be written as "(previously request_id=42)": find the writer outside that span.
        rest = text[: om.start()] + " " + text[om.end() :]
        writer = _find_rid(rest)
        victim = next((g for g in om.group(3, 4, 5) if g is not None), "").strip()
        if writer is None or not victim:
            return None
        tokens = om.group(2)
        if tokens is None:
            wm = _WITH_TOKENS_RE.search(rest)
            tokens = wm and wm.group(1)
        t, msg = split_prefix(text)
        event = Event(
            EventKind.BUFFER_OVERWRITE, victim, t=t, seq=seq, line=line, message=msg,
            offset=_int(om.group(1)), tokens=_int(tokens), donor=writer,
        )
        return event, (writer, victim)
    rid = _find_rid(text)
    if rid is None:
        return None
    # Substring guards first: most request_id lines match none of these and regexes cost more.
    wm = _WROTE_RE.search(text) if "wrote" in text else None
    if wm is not None:
        t, msg = split_prefix(text)
        event = Event(
            EventKind.BUFFER_WRITE, rid, t=t, seq=seq, line=line, message=msg,
            tokens=_int(wm.group(1)), offset=_int(wm.group(2)),
        )
        return event, (rid,)
    i = text.find("encode_image")
    if i >= 0 and _ENCODE_RE.search(text, i + 12):
        t, msg = split_prefix(text)
        return Event(EventKind.ENCODE_START, rid, t=t, seq=seq, line=line, message=msg), (rid,)
    if "first" in text and _FIRST_TOKEN_RE.search(text):
        t, msg = split_prefix(text)
        return Event(EventKind.FIRST_TOKEN, rid, t=t, seq=seq, line=line, message=msg), (rid,)
    if ("stitch" in text or "concat" in text or "consumed" in text) and _STITCH_RE.search(text):
        t, msg = split_prefix(text)
        # Drop the id before looking for counts so "request_id=42 tokens" is not read as 42 tokens.
        body = _RID_RE.sub(" ", text)
        tm, om2 = _TOKENS_RE.search(body), _OFFSET_RE.search(body)
        event = Event(
            EventKind.SYNC, rid, t=t, seq=seq, line=line, message=msg,
            tokens=_int(tm and tm.group(1)), offset=_int(om2 and om2.group(1)),
        )
        return event, (rid,)
    return None


def starts_gzip(path: str | os.PathLike) -> bool:
    """Whether a file begins with gzip's magic bytes (False when it cannot be read)."""
    try:
        with open(path, "rb") as f:
            return f.read(2) == GZIP_MAGIC
    except OSError:
        return False


BOM = b"\xef\xbb\xbf"  # a UTF-8 byte-order mark some editors and Windows tools put first: not part of the first line


def open_log(path: str | os.PathLike):
    """A binary file object for a log: gzip-compressed files (by their magic bytes) are decompressed as read, a leading
    UTF-8 BOM is skipped, and a pipe (a FIFO, `<(...)`) is read as a stream, never seeked (its first bytes, read to
    look at, come first again)."""
    f = open(path, "rb")
    try:
        if not f.seekable():
            return _open_stream(f)
        head = f.read(3)
        if head[:2] == GZIP_MAGIC:
            import gzip

            packed = gzip.open(path, "rb")
            try:
                packed.peek(1)  # the gzip header: a text file that merely starts with 1f 8b is read as text
            except (OSError, EOFError, zlib.error):
                packed.close()
            else:
                f.close()
                return _skip_bom(packed)
        f.seek(3 if head == BOM else 0)
        return f
    except BaseException:
        f.close()
        raise


def _open_stream(f):
    """open_log for a stream that cannot seek: the bytes read to look for gzip's magic and a BOM are handed back."""
    head = f.read(3)  # blocks until three bytes (or the end) came
    if head[:2] == GZIP_MAGIC:
        return _skip_bom(_gzip_owning(io.BufferedReader(_HeadFirst(head, f))))
    return io.BufferedReader(_HeadFirst(b"" if head == BOM else head, f))


def _gzip_owning(inner: io.BufferedReader):
    """A GzipFile reading `inner` that closes it with itself, as gzip.open closes the file it opened."""
    import gzip

    class _Owning(gzip.GzipFile):
        def close(self) -> None:
            try:
                super().close()
            finally:
                inner.close()

    return _Owning(fileobj=inner, mode="rb")


def _skip_bom(packed):
    """A decompressed stream with a leading UTF-8 BOM read past."""
    try:
        if packed.peek(3)[:3] == BOM:
            packed.read(3)
    except (OSError, EOFError, zlib.error):
        pass  # a corrupt stream: the scan's own read names it
    return packed


class _HeadFirst(io.RawIOBase):
    """A stream's bytes with the first few (already read) given back first; counts what it hands out (its tell: the
    progress bar's bytes), since a pipe has no position of its own."""

    def __init__(self, head: bytes, f):
        super().__init__()
        self.head, self.f, self.pos = head, f, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        if self.head:
            n = min(len(buf), len(self.head))
            buf[:n] = self.head[:n]
            self.head = self.head[n:]
        else:
            n = self.f.readinto(buf) or 0
        self.pos += n
        return n

    def tell(self) -> int:
        return self.pos

    def fileno(self) -> int:
        return self.f.fileno()

    def close(self) -> None:
        if not self.closed:
            self.f.close()
        super().close()


def _file_lines(path: Path) -> Iterator[bytes]:
    """The raw lines of a file, read one at a time; an over-long line yields only its first MAX_LINE_BYTES."""
    with open_log(path) as f:
        read = partial(f.readline, MAX_LINE_BYTES)
        skipping = False
        for raw in iter(read, b""):
            if skipping:
                skipping = not raw.endswith(b"\n")
                continue
            if len(raw) >= MAX_LINE_BYTES and not raw.endswith(b"\n"):
                skipping = True
            yield raw


def _consume(lines: Iterable, batch: Batch) -> None:
    """Feed lines (str or bytes) through the recogniser, filling the batch; keeps no line once handled."""
    events = batch.events
    requests = batch.requests
    seen: set[str] = set()
    total = unknown = 0
    for raw in lines:
        total += 1
        if isinstance(raw, bytes | bytearray):
            # Cheap prefilter on the bytes: most lines of a real log are noise and never get decoded.
            if not (_B_RID in raw or _B_DESYNC in raw or _B_SHAPE in raw or _B_OOB in raw):
                if raw and not raw.isspace():
                    unknown += 1
                continue
            if len(raw) >= MAX_LINE_BYTES and not raw.endswith(b"\n"):
                unknown += 1  # too long to be a runtime event: not examined
                continue
            try:
                text = bytes(raw).decode("utf-8")
            except UnicodeDecodeError:  # not UTF-8: unknown (as log_line._scan_line decides), never a phantom id
                unknown += 1
                continue
        elif isinstance(raw, str):
            if not (_RID_KEY in raw or _DESYNC_KEY in raw or _SHAPE_KEY in raw or _OOB_KEY in raw):
                if raw and not raw.isspace():
                    unknown += 1
                continue
            if len(raw) > MAX_LINE_BYTES:
                unknown += 1
                continue
            text = raw
        else:
            raise TypeError(f"log lines must be str or bytes, got {type(raw).__name__} at line {total}")
        found = recognise_line(text, total, len(events))
        if found is None:
            unknown += 1
            continue
        event, ids = found
        events.append(event)
        for rid in ids:
            if rid not in seen:
                seen.add(rid)
                requests.append(BatchRequest(request_id=rid, line=total))
    batch.total_lines = total
    batch.unknown_lines = unknown


def _shown(path: Path) -> str:
    """A path as an error line names it: at most 200 characters."""
    return str(path) if len(str(path)) <= 200 else str(path)[:200] + "..."


def checked_log_path(source: str | os.PathLike) -> Path:
    """A runtime log's path, checked: one-line ReplayFormatError for a missing file, a directory or a device (a pipe
    is allowed: a log may be streamed)."""
    return require_streamable(source, "runtime log", "a log file, or a pipe", ReplayFormatError, _shown(Path(source)))


def parse_runtime_log(source: str | os.PathLike | Iterable[str | bytes]) -> Batch:
    """Parse a runtime log (a path, or an iterable of str/bytes lines) into a Batch, one line at a time."""
    if isinstance(source, str | os.PathLike):
        path = checked_log_path(source)
        batch = Batch(source=str(path), kind="runtime-log")
        try:
            _consume(_file_lines(path), batch)
        except (OSError, EOFError, zlib.error) as exc:  # EOFError, zlib.error: a truncated or corrupt .gz
            reason = getattr(exc, "strerror", None) or exc
            raise ReplayFormatError(f"cannot read runtime log {_shown(path)}: {reason} (expected a readable file)") from None
        return batch
    if isinstance(source, bytes | bytearray):
        raise TypeError("parse_runtime_log takes a path or an iterable of lines, not a bytes blob")
    batch = Batch(source="<lines>", kind="runtime-log")
    _consume(source, batch)
    return batch
