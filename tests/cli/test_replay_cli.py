"""`qdebug replay` end to end: JSON report, broken capture lines, emitted logs, runtime logs, bad options."""

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from qdebug.cli import app
from qdebug.replay.formats.runtime_log import parse_runtime_log

runner = CliRunner()
SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"


def _small_capture(tmp_path, broken=True):
    """Four good requests from the sample capture plus broken lines of three kinds."""
    shutil.copytree(SAMPLE / "capture", tmp_path / "capture")
    lines = [l for l in (SAMPLE / "capture.jsonl").read_text().splitlines() if l.strip()][:4]
    if broken:
        lines.insert(1, '{"id": "bad-json", "messages": [')
        lines.append(json.dumps({"id": "no-image", "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "capture/missing.png"}}, {"type": "text", "text": "Describe the image."}]}]}))
        lines.append(json.dumps({"id": "bad-b64", "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@notbase64"}}, {"type": "text", "text": "x"}]}]}))
    path = tmp_path / "burst.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_json_report_and_broken_lines(tmp_path):
    path = _small_capture(tmp_path)
    result = runner.invoke(app, ["replay", str(path), "--json", "-", "--concurrency", "2"])
    assert result.exit_code == 1, result.output  # some requests failed
    data = json.loads(result.stdout)
    assert set(data) >= {"requests", "contamination", "events", "findings"}
    ids = [r["id"] for r in data["requests"]]
    assert ids == ["req-01", "2", "req-02", "req-03", "req-04", "no-image", "bad-b64"]  # input order; unreadable line → its number
    by_id = {r["id"]: r for r in data["requests"]}
    errors = [r for r in data["requests"] if r["verdict"] == "error"]
    assert len(errors) == 3 and all(r["error"] for r in errors)
    assert "bad json" in by_id["2"]["error"].lower()
    assert "not found" in by_id["no-image"]["error"] and "missing.png" in by_id["no-image"]["error"]
    assert "base64" in by_id["bad-b64"]["error"]
    good = [r for r in data["requests"] if r["verdict"] != "error"]
    assert len(good) == 4 and all(r["replayed"] == r["reference"] for r in good)
    for r in data["requests"]:
        assert {"id", "reference", "replayed", "observed", "verdict", "donor", "text_offset", "visual_offset"} <= set(r)
    assert data["contamination"]["ids"] == [r["id"] for r in good]
    assert len(data["contamination"]["matrix"]) == 4
    for e in data["events"]:
        assert {"t", "request_id", "kind", "offset", "tokens", "line"} <= set(e)
    for f in data["findings"]:
        assert {"kind", "severity", "request_id", "donor", "message"} <= set(f)
    assert by_id["req-01"]["observed"] is not None


def test_faulty_replay_outputs_emit_log_and_png(tmp_path):
    path = _small_capture(tmp_path, broken=False)
    log, png, js = tmp_path / "emitted.log", tmp_path / "timeline.png", tmp_path / "r.json"
    result = runner.invoke(app, ["replay", str(path), "--inject", "shared-visual-buffer", "--seed", "0",
                                 "--emit-log", str(log), "--timeline-png", str(png), "--json", str(js)])
    assert result.exit_code == 1, result.output  # the injected fault contaminates: replay exits 1
    assert "contamination" in result.stdout and "offset timeline" in result.stdout
    data = json.loads(js.read_text())
    parsed = parse_runtime_log(log)
    mine = [(e["kind"], e["request_id"], e.get("donor")) for e in data["events"]]
    theirs = [(e.kind, e.request_id, e.donor) for e in parsed.events]
    assert theirs == mine and parsed.unknown_lines == 0
    from PIL import Image

    with Image.open(png) as im:
        assert im.format == "PNG"


def test_runtime_log_report(tmp_path):
    result = runner.invoke(app, ["replay", str(SAMPLE / "burst.log"), "--json", "-"])
    assert result.exit_code == 1, result.output  # contaminated and error requests
    data = json.loads(result.stdout)
    by_id = {r["id"]: r for r in data["requests"]}
    assert by_id["42"]["verdict"] == "contaminated" and by_id["42"]["donor"] == "43"
    assert by_id["45"]["verdict"] == "contaminated" and by_id["45"]["donor"] == "46"
    assert by_id["44"]["verdict"] == "ok"  # overwrote its own buffer
    assert by_id["47"]["verdict"] == "error" and by_id["47"]["donor"] is None  # overwritten after its stitch
    assert all(r["reference"] is None and r["replayed"] is None for r in data["requests"])
    kinds = sorted(f["kind"] for f in data["findings"])
    assert kinds.count("contamination") == 2 and kinds.count("desync") == 2
    assert "shape_mismatch" in kinds and "index_out_of_bounds" in kinds


def test_bad_options_and_files(tmp_path):
    path = _small_capture(tmp_path, broken=False)
    cases = [
        (["replay", str(path), "--inject", "bogus"], "--inject bogus"),
        (["replay", str(path), "--mode", "sideways"], "--mode sideways"),
        (["replay", str(path), "--mode", "batched", "--inject", "shared-visual-buffer"], "use --mode threads"),
        (["replay", str(tmp_path / "none.jsonl")], "none.jsonl"),
        (["replay", str(path), "--format", "xml"], "--format"),
    ]
    empty = tmp_path / "empty.log"
    empty.write_text("")
    cases.append((["replay", str(empty)], "empty"))
    for args, expect in cases:
        result = runner.invoke(app, args)
        assert result.exit_code not in (0, None), args
        err = result.stderr.strip()
        assert len(err.splitlines()) == 1 and expect in err, err
        assert "Traceback" not in result.output


def test_path_escape_needs_allow_paths(tmp_path):
    inner = tmp_path / "inner"
    inner.mkdir()
    shutil.copy(SAMPLE / "red_circle_top_left.png", tmp_path / "outside.png")
    (inner / "c.jsonl").write_text(json.dumps({"id": "x", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "../outside.png"}}, {"type": "text", "text": "Describe the image."}]}]}) + "\n")
    refused = runner.invoke(app, ["replay", str(inner / "c.jsonl"), "--json", "-"])
    assert refused.exit_code == 1
    assert "--allow-paths" in json.loads(refused.stdout)["requests"][0]["error"]
    allowed = runner.invoke(app, ["replay", str(inner / "c.jsonl"), "--json", "-", "--allow-paths"])
    assert allowed.exit_code == 0
    assert json.loads(allowed.stdout)["requests"][0]["replayed"] == "a red circle in the top left"
