"""Issue 11 fuzz: the runtime-log parser on random, long and adversarial lines: no exception, bounded time per line."""

from __future__ import annotations

import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qdebug.replay.formats.runtime_log import parse_runtime_log, recognise_line
from qdebug.vocab import EVENT_KINDS

FRAGMENTS = [
    "request_id", "request_id=", 'request_id="', "request_id='", "=", ":", " ", "\t", "\r", "\x00", "(", ")", '"', "'",
    "encode_image", "start", "wrote", "tokens", "at offset", "offset", "overwrote buffer", "(previously", "with",
    "stitch", "consumed", "first_token", "visual token offset", "textual offset", "token index", "sequence length",
    "TokenStreamDesync", "VisualEmbeddingShapeMismatch", "CrossAttentionIndexOutOfBounds", "2024-07-12T14:23:07.123Z",
    "+99:99", "-0800", "Jul 12 14:23:08", "[DEBUG]", "ERROR", "1e400", "9" * 40, "\ufffd", "é",
]
# Per line, even at the examined maximum; a super-linear regex took minutes on 1 MB.
SECONDS_PER_LINE = 3.0

fragment_lines = st.lists(st.sampled_from(FRAGMENTS), max_size=60).map("".join)
repeated_lines = st.tuples(st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=4).map(" ".join),
                           st.integers(1, 40_000)).map(lambda p: p[0] * p[1])


def _check(found):
    if found is None:
        return
    event, ids = found
    assert event.kind in EVENT_KINDS
    assert all(isinstance(i, str) and i for i in ids)
    for value in (event.offset, event.tokens, event.text_offset):
        assert value is None or (isinstance(value, int) and 0 <= value < 10**18)
    assert event.t is None or event.t == event.t  # never NaN
    assert len(event.message) <= 500


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(fragment_lines, st.text(max_size=300)))
def test_random_lines_never_raise(line):
    _check(recognise_line(line))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(repeated_lines)
def test_long_adversarial_lines_are_bounded_in_time(line):
    t0 = time.perf_counter()
    _check(recognise_line(line))
    assert time.perf_counter() - t0 < SECONDS_PER_LINE, f"{len(line):,}-char line took too long"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(fragment_lines.map(str.encode), st.binary(max_size=200)), max_size=30))
def test_random_byte_files_parse(tmp_path_factory, chunks):
    p = tmp_path_factory.mktemp("fz") / "x.log"
    p.write_bytes(b"\n".join(chunks))
    batch = parse_runtime_log(p)
    assert batch.total_lines >= 0 and batch.unknown_lines <= batch.total_lines
    for event in batch.events:
        _check((event, ()))
