"""Item 7: SIGTERM stops a replay like Ctrl-C (report of what finished, exit 143); during loading it says so."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

import qdebug.replay.engine as engine
from qdebug.cli import app

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"


def _capture(tmp_path: Path, n: int) -> Path:
    shutil.copytree(SAMPLE / "capture", tmp_path / "capture")
    lines = [ln for ln in (SAMPLE / "capture.jsonl").read_text().splitlines() if ln.strip()][:n]
    path = tmp_path / "burst.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_sigterm_mid_replay_writes_the_report_and_exits_143(tmp_path, monkeypatch):
    capture = _capture(tmp_path, 4)
    real, calls = engine.trace_request, []

    def trace_then_terminate(*args, **kwargs):
        trace = real(*args, **kwargs)
        calls.append(1)
        if len(calls) == 2:  # two isolated references done: a real SIGTERM to this process, as `timeout` sends it
            os.kill(os.getpid(), signal.SIGTERM)
        return trace

    monkeypatch.setattr(engine, "trace_request", trace_then_terminate)
    out = tmp_path / "report.json"
    result = CliRunner().invoke(app, ["replay", str(capture), "--device", "cpu", "--json", str(out)])
    assert result.exit_code == 143, result.output
    assert "terminated: the report covers the requests that finished" in result.stderr
    report = json.loads(out.read_text())
    assert report["interrupted"] is True
    assert [r["id"] for r in report["requests"]] == ["req-01", "req-02", "req-03", "req-04"]
    assert all(r["verdict"] == "error" for r in report["requests"][2:])  # never ran
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler is removed again


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to see the model loading")
@pytest.mark.parametrize("sig, code, says", [(signal.SIGTERM, 143, "terminated (SIGTERM)"), (signal.SIGINT, 130, "interrupted")])
def test_signal_while_loading_leaves_outputs_untouched(tmp_path, sig, code, says):
    capture = _capture(tmp_path, 2)
    out = tmp_path / "report.json"
    out.write_text("earlier report")
    exe = os.path.join(os.path.dirname(sys.executable), "qdebug")
    proc = subprocess.Popen([exe, "replay", str(capture), "--device", "cpu", "--json", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        maps = Path(f"/proc/{proc.pid}/maps")
        while proc.poll() is None and time.monotonic() < deadline:  # wait until torch is in: the model is loading
            if "libtorch" in maps.read_text():
                break
            time.sleep(0.05)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == code, err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"qdebug: error: {says}") and "no output was written" in last, err
    assert out.read_text() == "earlier report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["burst.jsonl", "capture", "report.json"]
