"""Issue 35 items 10 and 12, on both scan paths (the native pass and the RE2 passes) and the streaming parser:
a non-ASCII byte in a line's first 19 bytes (a UTF-8 BOM at the start of a log is enough) is never a traceback, a
BOM-started log reads as the same log without it, and a line that is not UTF-8 is unknown (the README), never a
request whose id holds U+FFFD."""

from __future__ import annotations

import json
import random

from typer.testing import CliRunner

from qdebug.cli import app
from qdebug.replay.formats.log_line import _scan_lines, _seconds_cache, fast_message
from qdebug.replay.formats.log_scan import scan_files
from qdebug.replay.formats.runtime_log import parse_runtime_log
from qdebug.vocab import EVENT_KINDS

from .log_synth import generate_log

runner = CliRunner()
LINES = [
    b"2024-07-12T14:23:07.101Z DEBUG VisualEncoder::encode_image: request_id=29 start",
    b"2024-07-12T14:23:07.102Z DEBUG VisualEncoder::write_buffer: request_id=29 wrote 256 tokens at offset 0",
    b"2024-07-12T14:23:07.103Z DEBUG VisualEncoder::write_buffer: request_id=30 overwrote buffer at offset 0 (previously 29)",
    b"2024-07-12T14:23:07.104Z DEBUG TokenSynchronizer::stitch: request_id=29 consumed 256 tokens at offset 0",
    b"2024-07-12T14:23:07.105Z DEBUG Generator::decode: request_id=29 first_token",
]


def _replay_json(path, *more: str):
    result = runner.invoke(app, ["replay", str(path), "--json", "-", *more])
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result, (json.loads(result.stdout) if result.stdout.strip().startswith("{") else None)


def _rows_three_ways(path):
    """(scan rows, streaming parser rows, reference rows), each as (line, t, kind, rid, donor, offset, tokens, message)."""
    rows = []
    stats = scan_files([path], rows.extend)
    scanned = [(line, t, EVENT_KINDS[k], rid, donor, off, tok, msg if msg is not None else fast_message(k, rid, off, tok))
               for _seq, line, t, k, rid, donor, off, _toff, tok, msg in rows]
    batch = parse_runtime_log(path)
    streamed = [(e.line, e.t, e.kind, e.request_id, e.donor, e.offset, e.tokens, e.message) for e in batch.events]
    lines = path.read_bytes().split(b"\n")
    lines = lines[:-1] if lines[-1] == b"" else lines
    if lines and lines[0].startswith(b"\xef\xbb\xbf"):  # what a reader of the file sees: the BOM is no part of line 1
        lines[0] = lines[0][3:]
    ref, _seq, unknown = _scan_lines(lines, 0, 0, _seconds_cache())
    reference = [(line, t, EVENT_KINDS[k], rid, donor, off, tok, msg if msg is not None else fast_message(k, rid, off, tok))
                 for _seq, line, t, k, rid, donor, off, _toff, tok, msg in ref]
    assert (stats.total_lines, stats.unknown_lines) == (batch.total_lines, batch.unknown_lines) == (len(lines), unknown)
    return scanned, streamed, reference


def test_a_bom_started_log_reads_as_the_same_log_without_it(recogniser, cache, tmp_path):
    plain, bom = tmp_path / "plain.log", tmp_path / "bom.log"
    plain.write_bytes(b"\n".join(LINES) + b"\n")
    bom.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    want = _replay_json(plain)[1]
    result, got = _replay_json(bom)
    assert result.exit_code == 1, result.output  # request 29 contaminated by 30, as without the BOM
    for key in ("requests", "events", "findings", "unknown_lines"):
        assert got[key] == want[key], key
    assert got["events"][0]["t"] is not None  # line 1 kept its time: the BOM is not part of its stamp
    result = runner.invoke(app, ["replay", "--index-only", str(bom), "--out", str(tmp_path / "idx")])
    assert result.exit_code == 0, result.output
    assert "indexed 5 lines (5 events, 2 requests)" in result.stderr
    scanned, streamed, reference = _rows_three_ways(bom)
    assert scanned == streamed == reference


def test_non_ascii_bytes_in_the_first_19_bytes_are_never_a_traceback(recogniser, cache, tmp_path):
    rng = random.Random(12)
    path = tmp_path / "odd.log"
    generate_log(path, 3_000, seed=12)
    lines = path.read_bytes().split(b"\n")[:-1]
    for i in rng.sample(range(len(lines)), 400):  # a high byte (or a BOM, or a UTF-8 letter) somewhere in the stamp
        k = rng.randrange(19)
        piece = rng.choice([b"\xe9", b"\xff", b"\xef\xbb\xbf", "é".encode(), "٣".encode()])
        lines[i] = lines[i][:k] + piece + lines[i][k + rng.randrange(2):]
    path.write_bytes(b"\n".join(lines) + b"\n")
    result, doc = _replay_json(path, "--exit-zero")
    assert result.exit_code == 0, result.output
    assert doc["unknown_lines"] > 0
    result = runner.invoke(app, ["replay", "--index-only", str(path), "--out", str(tmp_path / "idx")])
    assert result.exit_code == 0, result.output
    scanned, streamed, reference = _rows_three_ways(path)
    assert scanned == streamed == reference


def test_invalid_utf8_in_a_request_id_is_an_unknown_line_not_a_request(recogniser, cache, tmp_path):
    path = tmp_path / "ids.log"
    bad = [
        b"2024-07-12T14:23:07.106Z DEBUG VisualEncoder::encode_image: request_id=29\xff start",
        b"2024-07-12T14:23:07.107Z DEBUG VisualEncoder::write_buffer: request_id=3\xc3 wrote 16 tokens at offset 0",
        b"2024-07-12T14:23:07.108Z DEBUG VisualEncoder::write_buffer: request_id=31 overwrote buffer at offset 0 (previously 29\xfe)",
        b"2024-07-12T14:23:07.109Z WARN TokenStreamDesyncWarning: visual token offset 4 differs from textual offset 0 (request_id=\xed\xa0\x80)",
    ]
    path.write_bytes(b"\n".join(LINES + bad) + b"\n")
    result, doc = _replay_json(path)
    assert result.exit_code == 1, result.output
    ids = [r["id"] for r in doc["requests"]]
    assert ids == ["29", "30"]  # no "29\ufffd", "3\ufffd" or "31" from the lines that are not UTF-8
    assert not any("\ufffd" in json.dumps(e) for e in doc["events"])
    assert doc["unknown_lines"] == len(bad)
    scanned, streamed, reference = _rows_three_ways(path)
    assert scanned == streamed == reference and len(scanned) == len(LINES)
