"""The runtime-log stream parser and writer: known logs, the sample, fuzzed garbage, round trips."""

from __future__ import annotations

import datetime as dt
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qdebug.errors import ReplayFormatError
from qdebug.replay.batch import Event
from qdebug.replay.formats.log_writer import format_event, write_runtime_log
from qdebug.replay.formats.runtime_log import JOURNAL_YEAR, MAX_LINE_BYTES, parse_runtime_log
from qdebug.vocab import EVENT_KINDS, EventKind

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "burst.log"


def epoch(*args, offset_h: float = 0.0) -> float:
    """Seconds since the epoch of a UTC (or offset) wall-clock time, computed independently of the parser."""
    tz = dt.timezone(dt.timedelta(hours=offset_h))
    return dt.datetime(*args, tzinfo=tz).timestamp()


# A log whose truth is known line by line: every timestamp style, both level styles, noise and tracebacks.
KNOWN = [
    "2024-07-12T14:23:01Z INFO qwen-inference starting",  # 1 unknown
    "[DEBUG] VisualEncoder::encode_image: request_id=42 start",  # 2 no timestamp
    "[DEBUG] VisualEncoder::encode_image: request_id=43 start",  # 3
    "2024-07-12T14:23:07.842Z DEBUG VisualEncoder::write_buffer: request_id=42 wrote 256 tokens at offset 0",  # 4
    "",  # 5 blank
    "2024-07-12 14:23:07.900+02:00 [DEBUG] VisualEncoder::write_buffer:  request_id=43  overwrote buffer at offset 0 (previously 42)",  # 6
    "Jul 12 14:23:08 gpu-node-3 qwen-inference[123]: [WARN] TokenStreamDesyncWarning: visual token offset 256 differs from textual offset 0 (request_id=42)",  # 7
    "Jul  2 09:05:01.250 gpu-node-3 qwen-inference[123]: ERROR VisualEmbeddingShapeMismatchError: expected shape (batch, seq_len, dim) but got (batch, dim)",  # 8
    "Traceback (most recent call last):",  # 9 unknown
    '  File "/opt/qwen/sync.py", line 88, in stitch',  # 10 unknown
    "    raise VisualEmbeddingShapeMismatchError(expected, got)",  # 11 unknown (traceback, not a second error)
    "qwen_sdk.errors.VisualEmbeddingShapeMismatchError: expected shape (batch, seq_len, dim) but got (batch, dim)",  # 12 unknown
    "2024-07-12T14:23:07.849Z ERROR CrossAttentionIndexOutOfBounds: token index 1024 exceeds sequence length 768",  # 13
    "2024-07-12T14:23:09 warning TokenStreamDesyncWarning: visual token offset 384 differs from textual offset 0",  # 14
    "[debug] TokenSynchronizer::stitch: request_id=42 consumed 256 tokens at offset 0",  # 15
    "   ",  # 16 blank
    "INFO POST /v1/chat/completions accepted request_id=44",  # 17 unknown: an id, but no event
    '2024-07-12T14:23:10.5-05:00 DEBUG VisualEncoder::write_buffer: request_id="req 7" overwrote buffer at offset 512 with 128 tokens (previously req-6)',  # 18
    "[INFO] Generator::decode: request_id=42 first_token",  # 19
    "\x00\x01garbage\xff request_id",  # 20 unknown
]


def test_known_log_events_exactly():
    batch = parse_runtime_log(KNOWN)
    assert batch.kind == "runtime-log" and batch.source == "<lines>"
    assert batch.total_lines == 20
    assert batch.unknown_lines == 7  # lines 1, 9, 10, 11, 12, 17, 20; blanks 5 and 16 are not unknown
    ev = batch.events
    assert [e.seq for e in ev] == list(range(len(ev)))
    assert [(e.kind, e.line) for e in ev] == [
        (EventKind.ENCODE_START, 2), (EventKind.ENCODE_START, 3), (EventKind.BUFFER_WRITE, 4), (EventKind.BUFFER_OVERWRITE, 6), (EventKind.DESYNC, 7),
        (EventKind.SHAPE_MISMATCH, 8), (EventKind.INDEX_OUT_OF_BOUNDS, 13), (EventKind.DESYNC, 14), (EventKind.SYNC, 15), (EventKind.BUFFER_OVERWRITE, 18),
        (EventKind.FIRST_TOKEN, 19),
    ]
    overwrites = [(e.request_id, e.donor, e.offset, e.tokens, e.line) for e in ev if e.kind == EventKind.BUFFER_OVERWRITE]
    assert overwrites == [("42", "43", 0, None, 6), ("req-6", "req 7", 512, 128, 18)]
    assert "overwrote buffer at offset 0 (previously 42)" in ev[3].message
    desyncs = [(e.request_id, e.offset, e.text_offset, e.line) for e in ev if e.kind == EventKind.DESYNC]
    assert desyncs == [("42", 256, 0, 7), (None, 384, 0, 14)]
    shape = ev[5]
    assert shape.request_id is None
    assert "expected shape (batch, seq_len, dim) but got (batch, dim)" in shape.message
    oob = ev[6]
    assert (oob.offset, oob.tokens, oob.request_id) == (1024, 768, None)
    write = ev[2]
    assert (write.request_id, write.tokens, write.offset) == ("42", 256, 0)
    assert (ev[8].request_id, ev[8].tokens, ev[8].offset) == ("42", 256, 0)
    assert [r.request_id for r in batch.requests] == ["42", "43", "req 7", "req-6"]
    assert [r.line for r in batch.requests] == [2, 3, 18, 18]
    assert all(r.request is None for r in batch.requests)


def test_known_log_timestamps():
    ev = parse_runtime_log(KNOWN).events
    t = {e.line: e.t for e in ev}
    assert t[2] is None and t[3] is None and t[15] is None and t[19] is None
    assert t[4] == pytest.approx(epoch(2024, 7, 12, 14, 23, 7, 842000), abs=1e-6)
    assert t[6] == pytest.approx(epoch(2024, 7, 12, 14, 23, 7, 900000, offset_h=2), abs=1e-6)
    assert t[7] == pytest.approx(epoch(JOURNAL_YEAR, 7, 12, 14, 23, 8), abs=1e-6)
    assert t[8] == pytest.approx(epoch(JOURNAL_YEAR, 7, 2, 9, 5, 1, 250000), abs=1e-6)
    assert t[14] == pytest.approx(epoch(2024, 7, 12, 14, 23, 9), abs=1e-6)
    assert t[18] == pytest.approx(epoch(2024, 7, 12, 14, 23, 10, 500000, offset_h=-5), abs=1e-6)


@pytest.mark.parametrize(
    "line, rid",
    [
        ("[WARN] TokenStreamDesyncWarning: visual token offset 1 differs from textual offset 0 (request_id=42)", "42"),
        ("[DEBUG] Generator: request_id=req-7 first_token", "req-7"),
        ('[DEBUG] Generator: request_id="abc" first_token', "abc"),
        ("[DEBUG] Generator: request_id = 'a b' first_token", "a b"),
        ("[DEBUG] Generator: first_token for request_id:99,", "99"),
    ],
)
def test_request_id_forms(line, rid):
    (event,) = parse_runtime_log([line]).events
    assert event.request_id == rid


def test_sample_burst_log_truth():
    batch = parse_runtime_log(SAMPLE)
    assert batch.source == str(SAMPLE)
    assert batch.total_lines == 52 and batch.unknown_lines == 19
    assert [r.request_id for r in batch.requests] == [str(i) for i in range(41, 49)]
    ev = batch.events
    overwrites = [(e.request_id, e.donor, e.offset, e.line) for e in ev if e.kind == EventKind.BUFFER_OVERWRITE]
    assert overwrites == [("42", "43", 256, 14), ("44", "44", 512, 22), ("45", "46", 768, 31), ("47", "48", 1024, 47)]
    desyncs = [(e.request_id, e.offset, e.text_offset, e.line) for e in ev if e.kind == EventKind.DESYNC]
    assert desyncs == [("42", 256, 0, 16), (None, 384, 0, 38)]
    assert [(e.request_id, e.line) for e in ev if e.kind == EventKind.SHAPE_MISMATCH] == [("46", 32)]
    assert [(e.request_id, e.offset, e.tokens, e.line) for e in ev if e.kind == EventKind.INDEX_OUT_OF_BOUNDS] == [
        ("47", 1024, 768, 48)
    ]
    assert sorted(e.request_id for e in ev if e.kind == EventKind.SYNC) == ["41", "42", "43", "44", "45", "47", "48"]
    assert all(e.t is not None for e in ev)
    assert [e.t for e in ev] == sorted(e.t for e in ev)


def test_missing_and_directory_sources(tmp_path):
    with pytest.raises(ReplayFormatError, match="not found: .*nope.log"):
        parse_runtime_log(tmp_path / "nope.log")
    with pytest.raises(ReplayFormatError, match="directory"):
        parse_runtime_log(tmp_path)


def test_file_lines_that_are_not_utf8_are_unknown_and_never_stop_the_read(tmp_path):
    p = tmp_path / "mixed.log"
    p.write_bytes(
        b"\xff\xfe binary junk\r\n"
        b"[DEBUG] VisualEncoder::encode_image: request_id=\xc3\xa9t\xe9 start\r\n"  # not UTF-8: unknown (issue 35 item 10)
        b"[DEBUG] VisualEncoder::encode_image: request_id=\xc3\xa9t start\r\n"
        b"\n"
        b"[DEBUG] VisualEncoder::write_buffer: request_id=7 wrote 16 tokens at offset 32"  # no final newline
    )
    batch = parse_runtime_log(str(p))
    assert batch.total_lines == 5 and batch.unknown_lines == 2
    assert [e.kind for e in batch.events] == [EventKind.ENCODE_START, EventKind.BUFFER_WRITE]
    assert batch.events[0].request_id == "\u00e9t"  # valid UTF-8 ids stay as they are; none holds U+FFFD
    assert (batch.events[1].tokens, batch.events[1].offset, batch.events[1].line) == (16, 32, 5)


def test_overlong_line_is_cut_and_later_lines_keep_their_numbers(tmp_path):
    p = tmp_path / "long.log"
    with open(p, "wb") as f:
        f.write(b"[DEBUG] request_id=1 " + b"x" * (MAX_LINE_BYTES + 10) + b"\n")
        f.write(b"[DEBUG] VisualEncoder::encode_image: request_id=2 start\n")
    batch = parse_runtime_log(p)
    assert batch.total_lines == 2 and batch.unknown_lines == 1
    assert [(e.request_id, e.line) for e in batch.events] == [("2", 2)]


def test_generator_source_streams_without_keeping_lines():
    # A generator has no len(): parsing must consume it lazily. Noise-only lines leave nothing behind,
    # so the peak memory of a ~10 MB log must stay far below its size.
    def lines(n):
        for i in range(n):
            yield f"2024-07-12T14:23:07.{i % 1000:03d}Z INFO noise line {i} " + "y" * 150 + "\n"
        yield "[DEBUG] VisualEncoder::encode_image: request_id=last start\n"

    tracemalloc.start()
    try:
        batch = parse_runtime_log(lines(60_000))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert batch.total_lines == 60_001 and batch.unknown_lines == 60_000
    assert [(e.request_id, e.line) for e in batch.events] == [("last", 60_001)]
    assert peak < 2 * 2**20


def test_non_line_items_are_a_type_error():
    with pytest.raises(TypeError):
        parse_runtime_log([b"ok\n", 5])
    with pytest.raises(TypeError):
        parse_runtime_log(b"[DEBUG] request_id=1 first_token")


# --- fuzz: garbage mixed into a valid log never raises and never hides the valid lines' events ---

VALID = [
    ("[DEBUG] VisualEncoder::encode_image: request_id=42 start", EventKind.ENCODE_START, "42"),
    ("2024-07-12T14:23:07.842Z DEBUG VisualEncoder::write_buffer: request_id=42 wrote 256 tokens at offset 0", EventKind.BUFFER_WRITE, "42"),
    ("Jul 12 14:23:07 host qwen[1]: [DEBUG] VisualEncoder::write_buffer: request_id=43 overwrote buffer at offset 0 (previously 42)", EventKind.BUFFER_OVERWRITE, "42"),
    ("[WARN] TokenStreamDesyncWarning: visual token offset 256 differs from textual offset 0 (request_id=42)", EventKind.DESYNC, "42"),
    ("2024-07-12T14:23:07.842Z ERROR VisualEmbeddingShapeMismatchError: expected shape (batch, seq_len, dim) but got (batch, dim)", EventKind.SHAPE_MISMATCH, None),
    ("2024-07-12T14:23:07.849Z ERROR CrossAttentionIndexOutOfBounds: token index 1024 exceeds sequence length 768", EventKind.INDEX_OUT_OF_BOUNDS, None),
    ("[DEBUG] TokenSynchronizer::stitch: request_id=42 consumed 256 tokens at offset 0", EventKind.SYNC, "42"),
    ("[DEBUG] Generator::decode: request_id=42 first_token", EventKind.FIRST_TOKEN, "42"),
]
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _interleave(garbage: list, picks: list[int], as_bytes: bool) -> tuple[list, dict[int, tuple]]:
    """Garbage lines with valid ones after each, and the expected (kind, id) per 1-based line."""
    lines: list = []
    expected: dict[int, tuple] = {}
    for junk, pick in zip(garbage, picks):
        lines.append(junk)
        text, kind, rid = VALID[pick]
        lines.append(text.encode() if as_bytes else text)
        expected[len(lines)] = (kind, rid)
    return lines, expected


def _check(batch, lines, expected):
    assert batch.total_lines == len(lines)
    by_line = {e.line: (e.kind, e.request_id) for e in batch.events}
    for line, want in expected.items():
        assert by_line.get(line) == want
    assert batch.unknown_lines <= len(lines) - len(expected)


@FUZZ
@given(st.lists(st.text(max_size=200), max_size=30), st.data())
def test_fuzz_text_lines(garbage, data):
    picks = data.draw(st.lists(st.integers(0, len(VALID) - 1), min_size=len(garbage), max_size=len(garbage)))
    lines, expected = _interleave(garbage, picks, as_bytes=False)
    _check(parse_runtime_log(lines), lines, expected)


@FUZZ
@given(st.lists(st.binary(max_size=200), max_size=30), st.data())
def test_fuzz_binary_lines(garbage, data):
    picks = data.draw(st.lists(st.integers(0, len(VALID) - 1), min_size=len(garbage), max_size=len(garbage)))
    lines, expected = _interleave(garbage, picks, as_bytes=True)
    _check(parse_runtime_log(iter(lines)), lines, expected)


@FUZZ
@given(st.lists(st.binary(max_size=120).map(lambda b: b.replace(b"\n", b" ")), max_size=20), st.data())
def test_fuzz_binary_file(tmp_path_factory, garbage, data):
    picks = data.draw(st.lists(st.integers(0, len(VALID) - 1), min_size=len(garbage), max_size=len(garbage)))
    lines, expected = _interleave(garbage, picks, as_bytes=True)
    path = tmp_path_factory.mktemp("fuzz") / "f.log"
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    _check(parse_runtime_log(path), lines, expected)


@FUZZ
@given(st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.floats(0, 1)), min_size=1, max_size=30))
def test_fuzz_truncated_lines_never_raise(cuts):
    lines = []
    for pick, frac in cuts:
        text = VALID[pick][0]
        lines.append(text[: int(len(text) * frac)])
        lines.append(text.encode()[: int(len(text) * frac)])
    batch = parse_runtime_log(lines)
    blanks = sum(1 for x in lines if not x.strip())
    assert batch.total_lines == len(lines)
    assert batch.unknown_lines + len(batch.events) + blanks == len(lines)


# --- writer round trip ---

ROUND_TRIP = [
    Event(EventKind.ENCODE_START, "42", t=1720794187.842),
    Event(EventKind.BUFFER_WRITE, "42", t=1720794187.85, tokens=256, offset=0),
    Event(EventKind.BUFFER_OVERWRITE, "42", t=1720794187.86, offset=0, tokens=128, donor="43"),
    Event(EventKind.BUFFER_OVERWRITE, "req 6", t=None, offset=512, donor="req 7"),
    Event(EventKind.DESYNC, "42", t=12.5, offset=256, text_offset=0),
    Event(EventKind.DESYNC, None, t=13.0, offset=384, text_offset=0),
    Event(EventKind.SHAPE_MISMATCH, "46", t=14.0, message="VisualEmbeddingShapeMismatchError: expected shape (a) but got (b) (request_id=46)"),
    Event(EventKind.INDEX_OUT_OF_BOUNDS, "47", t=15.0, offset=1024, tokens=768),
    Event(EventKind.SYNC, "42", t=16.0, tokens=256, offset=0),
    Event(EventKind.FIRST_TOKEN, "x'y", t=0.000001),
]


def test_writer_round_trip(tmp_path):
    path = write_runtime_log(ROUND_TRIP, tmp_path / "out.log")
    batch = parse_runtime_log(path)
    assert batch.total_lines == len(ROUND_TRIP) and batch.unknown_lines == 0
    got = [(e.kind, e.request_id, e.offset, e.text_offset, e.tokens, e.donor) for e in batch.events]
    want = [(e.kind, e.request_id, e.offset, e.text_offset, e.tokens, e.donor) for e in ROUND_TRIP]
    assert got == want
    for a, b in zip(batch.events, ROUND_TRIP):
        assert (a.t is None) == (b.t is None)
        if b.t is not None:
            assert a.t == pytest.approx(b.t, abs=2e-6)
    assert "expected shape (a) but got (b)" in batch.events[6].message
    assert batch.events[6].message.count("request_id") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.log"]


def test_writer_line_shapes():
    assert format_event(ROUND_TRIP[2]) == (
        "2024-07-12T14:23:07.860000Z [DEBUG] VisualEncoder::write_buffer: request_id=43 overwrote buffer "
        "at offset 0 with 128 tokens (previously 42)"
    )
    assert format_event(ROUND_TRIP[4]) == (
        "1970-01-01T00:00:12.500000Z [WARN] TokenStreamDesyncWarning: visual token offset 256 "
        "differs from textual offset 0 (request_id=42)"
    )


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(EVENT_KINDS),
            st.text("abc-_.7 ", min_size=1, max_size=8).filter(lambda s: s.strip() == s),
            st.text("xyz09", min_size=1, max_size=5),
            st.one_of(st.none(), st.integers(0, 10**6)),
            st.one_of(st.none(), st.integers(0, 10**6)),
            st.one_of(st.none(), st.floats(0, 4e9)),
        ),
        max_size=20,
    )
)
def test_writer_round_trip_fuzz(tmp_path_factory, specs):
    events = [
        Event(kind, rid, t=t, offset=a, tokens=b, text_offset=b if kind == EventKind.DESYNC else None,
              donor=donor if kind == EventKind.BUFFER_OVERWRITE else None)
        for kind, rid, donor, a, b, t in specs
    ]
    for e in events:
        if e.kind == EventKind.SHAPE_MISMATCH:
            e.offset = e.tokens = None  # shape mismatches carry only a message
        if e.kind in (EventKind.ENCODE_START, EventKind.FIRST_TOKEN):
            e.offset = e.tokens = None
        if e.kind == EventKind.DESYNC:
            e.tokens = None  # a desync's second number is its text offset
    batch = parse_runtime_log(write_runtime_log(events, tmp_path_factory.mktemp("rt") / "x.log"))
    assert batch.unknown_lines == 0
    key = lambda e: (e.kind, e.request_id, e.offset, e.text_offset, e.tokens, e.donor)  # noqa: E731
    assert [key(e) for e in batch.events] == [key(e) for e in events]


def test_writer_is_atomic_on_bad_event(tmp_path):
    target = tmp_path / "keep.log"
    target.write_text("previous contents\n")
    with pytest.raises(ValueError, match="bogus"):
        Event("bogus", "1")  # an Event's kind is a vocabulary word from the start
    bad = Event(EventKind.SYNC, "1")
    bad.kind = "bogus"  # set afterwards, past the check: the writer still refuses it
    with pytest.raises(ValueError, match="unknown event kind"):
        write_runtime_log([ROUND_TRIP[0], bad], target)
    assert target.read_text() == "previous contents\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.log"]
    with pytest.raises(ValueError, match="donor"):
        format_event(Event(EventKind.BUFFER_OVERWRITE, "1", offset=0))
