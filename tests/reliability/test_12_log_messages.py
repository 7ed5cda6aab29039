"""Issue 11 case 12: a gzip log is read, a gzip capture is named, `1e400` is no offset, `+99:99` is no time zone."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qdebug.cli import app
from qdebug.errors import ReplayFormatError
from qdebug.replay.formats.runtime_log import parse_runtime_log, recognise_line

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "burst.log"


def _cli(args, tmp_path):
    return CliRunner().invoke(app, args, env={"QDEBUG_CACHE_DIR": str(tmp_path / "cache")})


def test_gzip_log_is_read_like_the_plain_one(tmp_path):
    gz = tmp_path / "burst.log.gz"
    with open(SAMPLE, "rb") as src, gzip.open(gz, "wb") as dst:
        shutil.copyfileobj(src, dst)
    plain, packed = parse_runtime_log(SAMPLE), parse_runtime_log(gz)
    assert packed.unknown_lines == plain.unknown_lines
    assert [e.to_json() for e in packed.events] == [e.to_json() for e in plain.events]
    a, b = _cli(["replay", str(SAMPLE), "--json", "-"], tmp_path), _cli(["replay", str(gz), "--json", "-"], tmp_path)
    assert a.exit_code == 1 and b.exit_code == 1, b.output  # the log holds contaminated requests: a replay that finds them exits 1
    da, db = json.loads(a.stdout), json.loads(b.stdout)
    for key in ("requests", "events", "findings", "unknown_lines", "contamination"):
        assert da[key] == db[key], key


def test_truncated_gzip_is_one_line_error(tmp_path):
    gz = tmp_path / "cut.log.gz"
    gz.write_bytes(gzip.compress(SAMPLE.read_bytes())[:200])
    result = _cli(["replay", str(gz)], tmp_path)
    assert result.exit_code != 0
    assert result.output.startswith("qdebug: error: ") and "Traceback" not in result.output
    assert str(gz) in result.output
    with pytest.raises(ReplayFormatError, match=f"cannot read runtime log {gz}: "):  # the library reader too (was a NameError)
        parse_runtime_log(gz)


def test_gzip_capture_is_named_as_compressed(tmp_path):
    gz = tmp_path / "capture.jsonl.gz"
    gz.write_bytes(gzip.compress(b'{"request_id": "a", "messages": []}\n'))
    result = _cli(["replay", str(gz)], tmp_path)
    assert result.exit_code == 2
    assert "gzip-compressed capture" in result.output and "Traceback" not in result.output


def test_visual_offset_1e400_is_not_an_offset():
    line = "2024-07-12T14:23:07Z WARN TokenStreamDesyncWarning: visual token offset 1e400 differs from textual offset 0 (request_id=42)"
    event, ids = recognise_line(line)
    assert event.kind == "desync" and ids == ("42",)
    assert event.offset is None and event.text_offset == 0
    huge = "2024-07-12T14:23:07Z DEBUG VisualEncoder::write_buffer: request_id=1 wrote 256 tokens at offset " + "9" * 5000
    event, _ = recognise_line(huge)
    assert event.kind == "buffer_write" and event.offset is None and event.tokens == 256


def test_time_zone_out_of_range_is_not_a_time():
    ok, _ = recognise_line("2024-07-12T14:23:07+14:00 DEBUG Generator::decode: request_id=1 first_token")
    bad, _ = recognise_line("2024-07-12T14:23:07+99:99 DEBUG Generator::decode: request_id=1 first_token")
    assert ok.t is not None
    assert bad.t is None and bad.kind == "first_token"
    worse, _ = recognise_line("2024-07-12T14:23:07-1575 DEBUG Generator::decode: request_id=1 first_token")
    assert worse.t is None


def test_text_log_that_starts_with_the_gzip_magic_is_read_as_text(tmp_path):
    p = tmp_path / "odd.log"
    p.write_bytes(b"\x1f\x8b\n2024-07-12T14:23:07Z DEBUG VisualEncoder::encode_image: request_id=2 start\n")
    batch = parse_runtime_log(p)
    assert (batch.total_lines, batch.unknown_lines) == (2, 1)
    assert [e.request_id for e in batch.events] == ["2"]
    data = json.loads(_cli(["replay", str(p), "--json", "-"], tmp_path).stdout)
    assert [e["request_id"] for e in data["events"]] == ["2"] and data["unknown_lines"] == 1
