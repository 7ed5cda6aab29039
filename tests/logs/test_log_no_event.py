"""Issue 36, its log items: a file holding no recognised event is exit 2 naming the formats looked for (it printed
"no contamination" and exited 0, a false pass for a CI gate), a log partly unrecognised says how many lines were, and
`--request ID` prints the events it selects (it printed only their count)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from qdebug.cli import app

from .log_synth import generate_log

runner = CliRunner()
SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "burst.log"


def _one_line_error(result, *words: str) -> str:
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("qdebug: error: ")]
    assert len(errors) == 1 and len([ln for ln in result.stderr.splitlines() if ln.strip()]) == 1, result.stderr
    for word in words:
        assert word in errors[0], errors[0]
    return errors[0]


def test_a_text_file_with_no_recognised_event_is_exit_2_naming_what_was_looked_for(cache, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("the meeting moved to Thursday\nrequest_id is what we log\n\nnothing else\n")
    line = _one_line_error(runner.invoke(app, ["replay", str(notes), "--json", "-"]), "no recognised event", "4 line(s)",
                           str(notes), "JSONL capture", "TokenStreamDesyncWarning", "VisualEncoder::write_buffer")
    assert "no contamination" not in line
    out = tmp_path / "r.json"
    _one_line_error(runner.invoke(app, ["replay", str(notes), "--json", str(out)]), "no recognised event")
    assert not out.exists()  # nothing half-written


def test_an_index_of_no_event_is_written_with_a_note_and_reads_as_exit_2(cache, tmp_path):
    notes = tmp_path / "quiet.log"
    notes.write_text("INFO started\nINFO healthy\n")
    result = runner.invoke(app, ["replay", "--index-only", str(notes), "--out", str(tmp_path / "idx")])
    assert result.exit_code == 0, result.output
    assert "no recognised event in the 2 line(s)" in result.stderr
    _one_line_error(runner.invoke(app, ["replay", str(tmp_path / "idx")]), "no recognised event")
    # read with a host that has events, it is part of the fleet like any other
    assert runner.invoke(app, ["replay", "--index-only", str(SAMPLE), "--out", str(tmp_path / "b")]).exit_code == 0
    (tmp_path / "idx" / "manifest.json").write_text((tmp_path / "idx" / "manifest.json").read_text().replace('"host": "', '"host": "q'))
    result = runner.invoke(app, ["replay", str(tmp_path / "idx"), str(tmp_path / "b"), "--json", "-"])
    assert result.exit_code == 1, result.output  # burst.log's contaminated requests


def test_a_partly_unrecognised_log_says_how_many_lines_were(cache, tmp_path):
    log = tmp_path / "svc.log"
    log.write_bytes(SAMPLE.read_bytes() + b"garbage one\ngarbage two\n")
    result = runner.invoke(app, ["replay", str(log)])
    assert result.exit_code == 1, result.output
    assert "21 unrecognised line(s)" in result.stderr  # burst.log's 19 and the two added


def test_request_filter_prints_the_events_it_selects(cache, tmp_path):
    log = tmp_path / "svc.log"
    generate_log(log, 20_000, seed=8)  # thousands of requests: the summary, not the full tables
    selected = [json.loads(x) for x in runner.invoke(app, ["replay", str(log), "--request", "1001", "--jsonl", "-"]).stdout.splitlines()]
    assert len(selected) >= 4
    result = runner.invoke(app, ["replay", str(log), "--request", "1001"])
    assert result.exit_code in (0, 1), result.output
    assert f"events shown (filter): {len(selected)}" in result.stdout
    rows = [ln for ln in result.stdout.splitlines() if ln.startswith("│ ") and " 1001 " in ln]
    assert [int(r.split("│")[1]) for r in rows] == [e["line"] for e in selected]  # each one printed, in log order
    assert [r.split("│")[3].strip() for r in rows] == [e["kind"] for e in selected]
