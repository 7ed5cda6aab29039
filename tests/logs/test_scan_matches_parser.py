"""The fast chunked scanner gives exactly the events of the line-by-line parser (fuzzed near its fast path)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qdebug.replay.formats.log_line import fast_message
from qdebug.replay.formats.log_scan import scan_files
from qdebug.replay.formats.runtime_log import parse_runtime_log
from qdebug.vocab import EVENT_KINDS

STAMPS = ["2024-07-12T14:23:07.103Z", "2024-07-12T14:23:07Z", "2024-07-12T14:23:07.1234567891Z", "2024-13-12T14:23:07.1Z",
          "2024-07-12T25:23:07.100Z", "2024-07-12T14:23:07.5+02:00", "2024-07-12 14:23:07.100Z", ""]
LEVELS = ["DEBUG", "INFO", "WARN", "WARNING", "ERROR", "TRACE", "[DEBUG]", "debug", "NOTICE"]
IDS = ["42", "req-7", "first_token", "TokenStreamDesync", "a" * 70, "", "x.y", "é", "-", "0042"]
BODIES = [
    "VisualEncoder::encode_image: request_id={rid} start",
    "VisualEncoder::write_buffer: request_id={rid} wrote {n} tokens at offset {m}",
    "TokenSynchronizer::stitch: request_id={rid} consumed {n} tokens at offset {m}",
    "Generator::decode: request_id={rid} first_token",
    "VisualEncoder::write_buffer: request_id={rid} overwrote buffer at offset {m} (previously {rid2})",
    "WARN TokenStreamDesyncWarning: visual token offset {m} differs from textual offset {n} (request_id={rid})",
    "INFO POST /v1/chat/completions accepted request_id={rid} images=1",
]
NUMS = ["0", "256", "1e400", "9" * 19, "-1", "3.5"]

lines = st.builds(
    lambda stamp, level, body, rid, rid2, n, m, sep, end: f"{stamp}{sep}{level}{sep}{body.format(rid=rid, rid2=rid2, n=n, m=m)}{end}",
    st.sampled_from(STAMPS), st.sampled_from(LEVELS), st.sampled_from(BODIES), st.sampled_from(IDS), st.sampled_from(IDS),
    st.sampled_from(NUMS), st.sampled_from(NUMS), st.sampled_from([" ", "  ", "\t"]), st.sampled_from(["", "\r", " ", "\x00"]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(lines, max_size=25))
def test_scanner_rows_equal_parser_events(tmp_path, sample):
    p = tmp_path / "x.log"
    p.write_bytes("\n".join(sample).encode("utf-8", "surrogatepass"))
    rows = []
    stats = scan_files([p], rows.extend)
    batch = parse_runtime_log(p)
    assert (stats.total_lines, stats.unknown_lines) == (batch.total_lines, batch.unknown_lines)
    mine = [(seq, line, t, EVENT_KINDS[k], rid, donor, off, toff, tok, msg if msg is not None else fast_message(k, rid, off, tok))
            for seq, line, t, k, rid, donor, off, toff, tok, msg in rows]
    theirs = [(e.seq, e.line, e.t, e.kind, e.request_id, e.donor, e.offset, e.text_offset, e.tokens, e.message) for e in batch.events]
    assert mine == theirs
