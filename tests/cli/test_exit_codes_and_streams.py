"""The installed `qdebug` as a script sees it: exit codes that gate a CI job, `--json -` with stderr redirected, `wrote PATH`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.cli.installed import qdebug

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
IMAGE = SAMPLE / "red_circle_top_left.png"


def _capture(tmp_path: Path, n: int, observed: bool) -> Path:
    """The first `n` sample requests with their images; `observed` (what production said) kept or dropped."""
    shutil.copytree(SAMPLE / "capture", tmp_path / "capture")
    rows = [json.loads(line) for line in (SAMPLE / "capture.jsonl").read_text().splitlines() if line.strip()][:n]
    for row in rows:
        if not observed:
            row.pop("observed", None)
    path = tmp_path / "burst.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_attn_json_to_stdout_puts_the_report_in_redirected_stderr(tmp_path):
    png, saved = tmp_path / "a.png", tmp_path / "a.qdt"
    code, out, err = qdebug(tmp_path, "attn", IMAGE, "Describe the image.", "--device", "cpu", "--max-new-tokens", "3",
                            "--json", "-", "--png", png, "--save", saved)
    assert code == 0, err
    doc = json.loads(out)  # stdout is the JSON alone
    assert "generated" in err and doc["generated_text"] in err  # the report, though stderr is a file
    assert "\x1b[" not in err  # no colour off a terminal
    assert f"wrote {png}" in err and f"wrote {saved}" in err and png.exists() and saved.exists()


def test_runtime_log_with_contamination_exits_1_unless_exit_zero(tmp_path):
    png, events = tmp_path / "t.png", tmp_path / "e.jsonl"
    code, out, err = qdebug(tmp_path, "replay", SAMPLE / "burst.log", "--json", "-", "--timeline-png", png, "--jsonl", events)
    doc = json.loads(out)
    assert {r["verdict"] for r in doc["requests"]} >= {"contaminated", "error"}
    assert code == 1, err
    assert "Traceback" not in err and "\x1b[" not in err
    for r in doc["requests"]:  # the report is in stderr: every request with its verdict
        assert any(r["id"] in line and r["verdict"] in line for line in err.splitlines()), r
    assert f"wrote {png}" in err and f"wrote {events}" in err
    reports_only, out_zero, err_zero = qdebug(tmp_path, "replay", SAMPLE / "burst.log", "--json", "-", "--exit-zero")
    assert reports_only == 0, err_zero
    assert json.loads(out_zero)["requests"] == doc["requests"]


def test_one_ok_request_of_the_log_exits_0(tmp_path):
    code, out, err = qdebug(tmp_path, "replay", SAMPLE / "burst.log", "--request", "41", "--json", "-")
    assert [r["verdict"] for r in json.loads(out)["requests"]] == ["ok"]
    assert code == 0, err


def test_a_clean_capture_replay_exits_0_and_says_what_it_wrote(tmp_path):
    capture = _capture(tmp_path, 2, observed=False)
    report, log = tmp_path / "r.json", tmp_path / "r.log"
    code, out, err = qdebug(tmp_path, "replay", capture, "--device", "cpu", "--json", report, "--emit-log", log)
    doc = json.loads(report.read_text())
    assert [r["verdict"] for r in doc["requests"]] == ["ok", "ok"]
    assert code == 0, err
    assert "contamination" in out  # the report on stdout when the JSON goes to a file
    assert f"wrote {log}" in err and f"wrote {report}" in err


def test_capture_replay_exit_code_follows_its_verdicts(tmp_path):
    # The capture's `observed` answers are production's story; the exit code follows this replay's verdicts, as the JSON says.
    capture = _capture(tmp_path, 3, observed=True)
    code, out, err = qdebug(tmp_path, "replay", capture, "--device", "cpu", "--json", "-")
    doc = json.loads(out)
    assert any(f["kind"].startswith("observed_") for f in doc["findings"])
    # a clean replay of the demo on its own capture: every request answers alone as it does in the burst
    assert [r["verdict"] for r in doc["requests"]] == ["ok"] * 3, [(r["id"], r["verdict"]) for r in doc["requests"]]
    assert code == 0, err
    injected, out, err = qdebug(tmp_path, "replay", capture, "--device", "cpu", "--inject", "shared-visual-buffer", "--json", "-")
    assert any(r["verdict"] in ("contaminated", "desync") for r in json.loads(out)["requests"])
    assert injected == 1, err


def test_diff_json_to_stdout_keeps_the_report_and_names_the_png(tmp_path):
    png = tmp_path / "d.png"
    code, out, err = qdebug(tmp_path, "diff", IMAGE, "Describe the image.", "--device", "cpu", "--max-new-tokens", "2", "--json", "-", "--png", png)
    doc = json.loads(out)
    # the same request twice on one model and device: every stage agrees, nothing diverges, exit 0
    assert doc["first_divergence"] is None and {s["verdict"] for s in doc["stages"]} == {"ok"}, doc["first_divergence"]
    assert code == 0, err
    assert "preprocess" in err and "\x1b[" not in err  # the stage table, on a redirected stderr
    assert f"wrote {png}" in err and png.exists()


def test_estimate_json_to_stdout_keeps_its_lines_on_stderr(tmp_path):
    code, out, err = qdebug(tmp_path, "estimate", "--json", "-")
    assert code == 0, err
    json.loads(out)
    assert err.strip()  # the human-readable estimate, beside the JSON
    saved = tmp_path / "e.json"
    code, _out, err = qdebug(tmp_path, "estimate", "--json", saved)
    assert code == 0 and f"wrote {saved}" in err and saved.exists()


def test_replay_help_names_every_verdict_that_exits_1():
    """`replay --help` says which verdicts exit 1: every one but ok (the endpoint's server_mismatch, batch_dependent and
    cache_contaminated too: `found_problems` exits 1 on any verdict that is not ok)."""
    from typer.testing import CliRunner

    from qdebug.cli import app as cli_app
    from qdebug.vocab import Verdict

    text = " ".join(CliRunner().invoke(cli_app, ["replay", "--help"], env={"COLUMNS": "200"}).output.split())
    said = text.split("Exits 1 when", 1)[1].split("╭", 1)[0] if "Exits 1 when" in text else ""  # the paragraph, not the options
    assert all(v.value in said for v in Verdict if v != Verdict.OK), said
