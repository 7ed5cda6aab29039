"""Issue 21 items 8 and 23: a runtime log appended to while it is read is read up to its size at the start (and the
report says so); one truncated while read (copytruncate rotation) is named in an error finding, never a silent
partial report."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from qdebug.analysis.log_index_build import open_log_index
from qdebug.analysis.log_report import report_from_index
from qdebug.replay.formats import log_scan
from tests.logs.log_synth import generate_log

from .conftest import qdebug
from .hostile import strict_json

BURST = Path(__file__).resolve().parents[2] / "sample_data" / "burst.log"


def _log(tmp_path: Path, copies: int) -> Path:
    path = tmp_path / "svc.log"
    path.write_bytes(BURST.read_bytes() * copies)
    return path


def test_appended_while_read_stops_at_the_size_at_the_start(tmp_path, monkeypatch):
    monkeypatch.setattr(log_scan, "CHUNK_BYTES", 4096)  # several reads, so appends land while reading
    log = _log(tmp_path, 10)
    lines, size = log.read_bytes().count(b"\n"), log.stat().st_size
    appended = []

    def append_on_every_read(done, total, n):  # a writer as fast as the reader: before, the scan never caught up
        if len(appended) < 200:
            with open(log, "ab") as f:
                f.write(BURST.read_bytes())
            appended.append(1)

    index, _, interrupted = open_log_index([log], append_on_every_read, use_cache=False)
    report = report_from_index(index, None, interrupted)
    assert index.meta["total_lines"] == lines and index.meta["bytes_total"] == size
    grew = [f for f in report.findings if f.kind == "log_grew"]
    assert len(grew) == 1 and f"read up to its size at the start ({size:,} bytes)" in grew[0].message
    index.close()


def test_truncated_while_read_is_an_error_finding(tmp_path, monkeypatch):
    monkeypatch.setattr(log_scan, "CHUNK_BYTES", 4096)
    log = _log(tmp_path, 10)
    size = log.stat().st_size

    def truncate_after_first_read(done, total, n):
        if 0 < done < size and log.stat().st_size:
            with open(log, "r+b") as f:
                f.truncate(0)  # `truncate -s 0`, as logrotate's copytruncate does

    index, _, interrupted = open_log_index([log], truncate_after_first_read, use_cache=False)
    report = report_from_index(index, None, interrupted)
    shrank = [f for f in report.findings if f.kind == "log_shrank"]
    assert len(shrank) == 1 and f"shrank from {size:,} to 0 bytes" in shrank[0].message, report.findings
    assert shrank[0].severity == "error"
    index.close()


def test_the_command_says_the_log_grew(tmp_path):
    log = tmp_path / "svc.log"
    generate_log(log, 300_000, seed=3)
    stop = threading.Event()

    def appender():
        chunk = BURST.read_bytes()
        while not stop.is_set():
            with open(log, "ab") as f:
                f.write(chunk)
            time.sleep(0.005)

    writer = threading.Thread(target=appender)
    writer.start()
    try:
        out = tmp_path / "r.json"
        proc = qdebug("replay", log, "--json", out, "--exit-zero", timeout=300)
    finally:
        stop.set()
        writer.join()
    assert proc.returncode == 0, proc.stderr
    doc = strict_json(out.read_text())
    grew = [f for f in doc["findings"] if f["kind"] == "log_grew"]
    assert grew and "while it was read; read up to its size at the start" in grew[0]["message"]
    assert "grew from" in proc.stdout + proc.stderr


def test_sigterm_mid_read_stops_promptly_with_the_pages_in_memory(tmp_path):
    """SIGTERM (timeout, docker stop) mid-read writes what the report holds in memory, not every event read."""
    import os
    import signal
    import subprocess
    import sys

    log = tmp_path / "svc.log"
    generate_log(log, 1_500_000, seed=5)
    cache, out = Path(os.environ["QDEBUG_CACHE_DIR"]), tmp_path / "r.json"
    proc = subprocess.Popen([sys.executable, "-m", "qdebug", "replay", str(log), "--json", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline and not any(
            p.stat().st_size > 1 << 20 for p in cache.glob("*.building/events-*.parquet")):
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    _, stderr = proc.communicate(timeout=120)
    took = time.monotonic() - sent
    assert proc.returncode == 143, stderr
    assert "SIGTERM asks for a prompt stop" in stderr and "Traceback" not in stderr
    doc = strict_json(out.read_text())
    assert doc["interrupted"] is True and 0 < len(doc["events"]) <= 5_000
    assert took < 30, took
