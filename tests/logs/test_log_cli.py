"""`qdebug replay LOG...` on real files: filters, JSON Lines, rotated files, odd bytes, Ctrl-C, the cache."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qdebug.analysis.log_index_build import open_log_index
from qdebug.cli import app
from tests.logs.log_synth import generate_log

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "burst.log"
runner = CliRunner()


def _json(args):
    result = runner.invoke(app, ["replay", *args])
    assert result.exit_code == 1, result.output  # every log here holds a contaminated request: replay exits 1
    return result


def test_sample_log_json_has_sparse_cells_and_no_dense_matrix(cache):
    data = json.loads(_json([str(SAMPLE), "--json", "-"]).stdout)
    assert data["contamination"]["matrix"] is None
    cells = data["contamination"]["cells"]
    assert [(c["request_id"], c["donor"]) for c in cells] == [("42", "43"), ("45", "46")]
    assert all(c["score"] == 1.0 and c["evidence"].startswith("line ") and "overwrote" in c["evidence"] for c in cells)
    assert data["contamination"]["ids"] == [r["id"] for r in data["requests"]]


def test_filters_select_events_and_findings(cache):
    whole = json.loads(_json([str(SAMPLE), "--json", "-"]).stdout)
    story = json.loads(_json([str(SAMPLE), "--json", "-", "--request", "42"]).stdout)
    assert story["events"] and all("42" in (e["request_id"], e["donor"]) for e in story["events"])
    assert [r["id"] for r in story["requests"]] == ["42"]
    assert {e["seq"] for e in story["events"]} == {e["seq"] for e in whole["events"] if "42" in (e["request_id"], e["donor"])}
    only = json.loads(_json([str(SAMPLE), "--json", "-", "--kind", "overwrite", "--kind", "desync"]).stdout)
    assert {e["kind"] for e in only["events"]} == {"buffer_overwrite", "desync"}
    assert {f["kind"] for f in only["findings"]} == {"contamination", "desync"}
    late = json.loads(_json([str(SAMPLE), "--json", "-", "--since", "2024-07-12T14:23:07.200Z"]).stdout)
    assert late["events"] and all(e["t"] >= 1720794187.2 for e in late["events"])
    assert len(late["events"]) < len(whole["events"])
    early = json.loads(_json([str(SAMPLE), "--json", "-", "--until", "2024-07-12T14:23:07.150+00:00"]).stdout)
    assert early["events"] and all(e["t"] <= 1720794187.15 for e in early["events"])
    # verdicts are the whole log's, whatever is shown
    assert {r["id"]: r["verdict"] for r in late["requests"]} == {r["id"]: r["verdict"] for r in whole["requests"]}


@pytest.mark.parametrize("args, expect", [
    (["--since", "yesterday"], "--since 'yesterday': not an ISO time"),
    (["--kind", "explosion"], "--kind explosion: unknown event kind"),
    (["--since", "2024-07-12T15:00:00Z", "--until", "2024-07-12T14:00:00Z"], "is before --since"),
])
def test_bad_filters_are_one_line_errors(cache, args, expect):
    result = runner.invoke(app, ["replay", str(SAMPLE), *args])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [f"qdebug: error: {result.stderr.strip()[15:]}"]
    assert expect in result.stderr and "Traceback" not in result.output


def test_jsonl_streams_one_event_per_line(cache, tmp_path):
    out = tmp_path / "events.jsonl"
    _json([str(SAMPLE), "--jsonl", str(out), "--kind", "overwrite"])
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 4 and all(r["kind"] == "buffer_overwrite" for r in rows)
    stdout = _json([str(SAMPLE), "--jsonl", "-"]).stdout.splitlines()
    assert len(stdout) == 33 and all(json.loads(line)["seq"] == i for i, line in enumerate(stdout))


def test_rotated_files_on_the_command_line_merge_in_time_order(cache, tmp_path):
    lines = SAMPLE.read_bytes().splitlines(keepends=True)
    old, new = tmp_path / "svc.log.1.gz", tmp_path / "svc.log"
    old.write_bytes(gzip.compress(b"".join(lines[:25])))
    new.write_bytes(b"".join(lines[25:]))
    whole = json.loads(_json([str(SAMPLE), "--json", "-"]).stdout)
    merged = json.loads(_json([str(new), str(old), "--json", "-"]).stdout)
    for key in ("requests", "events", "findings", "unknown_lines"):
        assert merged[key] == whole[key], key
    assert merged["contamination"]["cells"] == whole["contamination"]["cells"]


def test_odd_bytes_never_stop_the_parse(cache, tmp_path):
    p = tmp_path / "odd.log"
    p.write_bytes(
        b"2024-07-12T14:23:07.103Z DEBUG VisualEncoder::encode_image: request_id=1 start\r\n"
        b"\x00\x00\x00 request_id=\xff\xfe garbage \x00\n"
        b"2024-07-12T14:23:07.104Z DEBUG VisualEncoder::write_buffer: request_id=1 wrote 16 tokens at offset 0\r\n"
        + b"x" * (2 << 20) + b"\n"
        b"\xc3\x28 not an event \xff\n"
        b"2024-07-12T14:23:07.105Z DEBUG VisualEncoder::write_buffer: request_id=2 overwrote buffer at offset 0 (previously 1)\r\n"
        b"2024-07-12T14:23:07.106Z DEBUG TokenSynchronizer::stitch: request_id=1 consumed 16 tokens at offset 0"
    )
    data = json.loads(_json([str(p), "--json", "-"]).stdout)
    assert [e["kind"] for e in data["events"]] == ["encode_start", "buffer_write", "buffer_overwrite", "stitch"]
    assert [e["line"] for e in data["events"]] == [1, 3, 6, 7]
    assert data["unknown_lines"] == 3
    assert data["contamination"]["cells"][0]["request_id"] == "1"


def test_ctrl_c_stops_and_reports_what_was_read(cache, tmp_path):
    p = tmp_path / "svc.log"
    generate_log(p, 300_000, seed=3)
    calls = []

    def stop_after_first_chunk(done, total, lines):
        calls.append(lines)
        if lines > 0:
            raise KeyboardInterrupt

    index, reused, interrupted = open_log_index([p], progress=stop_after_first_chunk)
    assert interrupted and not reused
    assert 0 < index.meta["total_lines"] < 300_000
    assert index.meta["complete"] is False
    assert not list(cache.glob("[!.]*/manifest.json"))  # an interrupted index is never reused
    again, reused, interrupted = open_log_index([p])
    assert not reused and not interrupted and again.meta["total_lines"] == 300_000
    assert open_log_index([p])[1]  # now cached


def test_changed_log_is_reindexed(cache, tmp_path):
    p = tmp_path / "svc.log"
    p.write_bytes(SAMPLE.read_bytes())
    assert open_log_index([p])[0].meta["events"] == 33
    with open(p, "ab") as f:
        f.write(b"2024-07-12T14:23:09.000Z DEBUG Generator::decode: request_id=99 first_token\n")
    index, reused, _ = open_log_index([p])
    assert not reused and index.meta["events"] == 34
