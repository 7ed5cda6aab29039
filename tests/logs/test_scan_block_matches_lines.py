"""The column-wise scanner gives exactly the rows and counts of the line-by-line reference, with its native pass
(qdebug/replay/formats/_logscan.c) and with the RE2 passes alone (what runs where the native pass is not built)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qdebug.replay.formats import log_columns, log_line, log_scan
from qdebug.replay.formats.log_line import _scan_lines, _seconds_cache
from qdebug.replay.formats.log_scan import ScanStats, scan_files

from .reference_chunks import reference_chunks

STAMPS = ["2024-07-12T14:23:07.103Z", "2024-07-12T14:23:07Z", "2024-07-12T14:23:07.1234567891Z", "2024-13-12T14:23:07.1Z",
          "2024-07-12T14:23:07.Z", "[2024-07-12T14:23:07Z", "2024-07-12T14:23:07.000001Z", "2024-07-12 14:23:07.100Z", ""]
LEVELS = ["DEBUG", "INFO", "WARN", "WARNING", "ERROR", "TRACE", "debug"]
IDS = ["42", "req-7", "-", "--", "TokenStreamDesync", "a" * 64, "a" * 65, "", "é", "0042", "x.y"]
BODIES = [
    "VisualEncoder::encode_image: request_id={rid} start",
    "VisualEncoder::encode_image: request_id={rid} first_token",
    "VisualEncoder::write_buffer: request_id={rid} wrote {n} tokens at offset {m}",
    "VisualEncoder::write_buffer: request_id={rid} consumed {n} tokens at offset {m}",
    "TokenSynchronizer::stitch: request_id={rid} consumed {n} tokens at offset {m}",
    "Generator::decode: request_id={rid} first_token",
    "VisualEncoder::write_buffer: request_id={rid} overwrote buffer at offset {m} (previously {rid})",
    "WARN TokenStreamDesyncWarning: visual token offset {m} differs from textual offset {n} (request_id={rid})",
    "TokenStreamDesyncWarning: visual token offset {m} differs from textual offset {n}",
    "ERROR VisualEmbeddingShapeMismatchError: expected shape (batch, seq_len, dim) but got (batch, dim)",
    "ERROR CrossAttentionIndexOutOfBounds: token index {n} exceeds sequence length {m}",
    # the rare shapes the column-wise scan takes itself, and near misses it must leave to the reference
    "VisualEncoder::write_buffer: request_id={rid} overwrote buffer at offset {m} with {n} tokens (previously {rid})",
    "VisualEncoder::write_buffer: request_id={rid} overwrote buffer at offset {m} (previously request_id={rid})",
    "VisualEncoder::write_buffer: request_id={rid} overwrote the buffer at offset {m} (previously {rid})",
    "TokenStreamDesyncWarning: visual token offset {m} differs from textual offset {n} (request_id={rid}) ",
    "CrossAttentionIndexOutOfBounds: token index {n} exceeds sequence length {m} (request_id={rid})",
    "VisualEmbeddingShapeMismatchError: expected shape (batch, seq_len, dim) but got (batch, dim) (request_id={rid})",
    "VisualEmbeddingShapeMismatchError: request_id={rid} got (batch, dim) (request_id={rid})",
    "VisualEmbeddingShapeMismatchError: got {n}\t(batch, dim)  ",
    "VisualEmbeddingShapeMismatchError: é (batch)",
    "VisualEmbeddingShapeMismatch: " + "z" * 600,
    "VisualEncoder::write_buffer: request_id={rid} overwrote buffer at offset {m} with  (previously {rid})",
    "VisualEncoder::write_buffer: request_id={rid} overwrote buffer at offset {m} with {n} (previously {rid})",
    "VisualEmbeddingShapeMismatchError: bad  (request_id={rid})",
    "VisualEmbeddingShapeMismatchError: (request_id={rid})",
    "TokenStreamDesyncWarning: visual token offset {m} differs from textual offset {n} (request_id={rid}",
    "INFO POST /v1/chat/completions accepted request_id={rid} images=1",
    "DEBUG gc: freed {n} blocks",
]
NUMS = ["0", "256", "9" * 18, "9" * 19, "-1"]

line = st.one_of(
    st.builds(
        lambda stamp, level, body, rid, n, m, sep, end: f"{stamp}{sep}{level}{sep}{body.format(rid=rid, n=n, m=m)}{end}",
        st.sampled_from(STAMPS), st.sampled_from(LEVELS), st.sampled_from(BODIES), st.sampled_from(IDS),
        st.sampled_from(NUMS), st.sampled_from(NUMS), st.sampled_from([" ", " ", "  "]), st.sampled_from(["", "\r", " "]),
    ),
    st.sampled_from(["", " ", "\t", "\r", " \x0b\x0c ", "\x1c", "x" * 300, "request_id=1 " + "y" * 300]),
)


def reference(path):
    stats = ScanStats()
    rows, seq, clock = [], 0, _seconds_cache()
    with open(path, "rb") as f:
        for lines in reference_chunks(f, None):
            got, seq, unknown = _scan_lines(lines, stats.total_lines, seq, clock)
            rows += got
            stats.total_lines += len(lines)
            stats.unknown_lines += unknown
    return rows, stats.total_lines, stats.unknown_lines


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(line, max_size=40), st.integers(1, 4096), st.booleans())
def test_block_scan_equals_line_scan(tmp_path, monkeypatch, recogniser, sample, chunk, final_newline):
    monkeypatch.setattr(log_scan, "CHUNK_BYTES", chunk)
    monkeypatch.setattr(log_scan, "MAX_LINE_BYTES", 256)  # some lines are over-long, some span chunks
    p = tmp_path / "x.log"
    p.write_bytes(("\n".join(sample) + ("\n" if final_newline else "")).encode("utf-8"))
    rows = []
    stats = scan_files([p], rows.extend)
    assert (rows, stats.total_lines, stats.unknown_lines) == reference(p)


def test_every_shape_id_and_number_equals_line_scan(tmp_path, monkeypatch, recogniser):
    """Every body with every id and number (and every stamp, level and separator with each body) in one log: the
    column-wise shapes, common and rare, and the lines they must leave to the reference, all equal the line scan."""
    monkeypatch.setattr(log_line, "MAX_LINE_BYTES", 512)  # the 600-byte bodies are over it, as a 1 MiB line would be
    lines = [f"2024-07-12T14:23:07.103Z ERROR {body.format(rid=rid, n=n, m=m)}"
             for body in BODIES for rid in IDS for n in NUMS for m in NUMS]
    lines += [f"{stamp}{sep}{level}{sep}{body.format(rid='42', n='7', m='256')}{end}"
              for body in BODIES for stamp in STAMPS for level in LEVELS for sep in (" ", "  ") for end in ("", "\r", " ")]
    p = tmp_path / "every.log"
    p.write_bytes(("\n".join(lines) + "\n").encode("utf-8"))
    rows = []
    stats = scan_files([p], rows.extend)
    want = reference(p)
    assert len(rows) > len(lines) // 2  # most are events: the comparison is not of two empty lists
    assert (rows, stats.total_lines, stats.unknown_lines) == want


def test_native_pass_refuses_a_chunk_not_cut_at_newlines():
    """The native pass reads only complete lines: a chunk that does not start and end at a newline is refused."""
    from qdebug.replay.formats import _logscan

    kinds, most = log_columns._NATIVE_KINDS, 1 << 20
    assert _logscan.scan_block(b"\nx\n", 3, kinds, most)[0] == 1
    for buf, stop in ((b"x\n", 2), (b"\nx", 2), (b"\nx\n", 4), (b"\nx\n", 0)):
        with pytest.raises(ValueError, match="newlines"):
            _logscan.scan_block(buf, stop, kinds, most)
    with pytest.raises(ValueError, match="8 kind codes"):
        _logscan.scan_block(b"\nx\n", 3, kinds[:7], most)


def test_a_long_line_far_from_the_chunk_end_is_carried_whole(tmp_path, monkeypatch, recogniser):
    """A chunk whose last newline is far from its end (a 150 KiB line): the lines are cut at that newline all the
    same, and the long line is carried into the next chunk."""
    monkeypatch.setattr(log_scan, "CHUNK_BYTES", 256 << 10)
    event = "2024-07-12T14:23:07.103Z DEBUG VisualEncoder::encode_image: request_id={n} start"
    lines = [event.format(n=n) for n in range(1500)]  # about 120 KiB
    lines.append("2024-07-12T14:23:08Z INFO " + "x" * (150 << 10))  # under MAX_LINE_BYTES (1 MiB), over 64 KiB
    lines += [event.format(n=n) for n in range(1500, 6000)]
    p = tmp_path / "long.log"
    p.write_bytes(("\n".join(lines) + "\n").encode("utf-8"))
    rows = []
    stats = scan_files([p], rows.extend)
    assert len(rows) == 6000 and stats.total_lines == 6001
    assert (rows, stats.total_lines, stats.unknown_lines) == reference(p)
