"""Issue 35 item 19 (first part): a named pipe or `<(...)` as the log is read as a stream (it failed "not seekable"),
by `replay LOG` and by `replay --index-only`, gzip'd or not, with the same report as the file; a pipe's index is
never cached (its path names no content a later run could reuse)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from .conftest import qdebug

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "burst.log"


def _feed(fifo: Path, data: bytes) -> threading.Thread:
    """A writer on the pipe, in small pieces as a service writes."""

    def write() -> None:
        with open(fifo, "wb") as f:
            for i in range(0, len(data), 333):
                f.write(data[i : i + 333])
                f.flush()

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def _report(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 1, proc.stderr  # burst.log's contaminated requests
    assert "Traceback" not in proc.stderr
    doc = json.loads(proc.stdout)
    doc.pop("source", None)
    return doc


@pytest.mark.parametrize("packed", [False, True])
def test_replay_reads_a_named_pipe_as_the_file(tmp_path, packed):
    want = _report(qdebug("replay", SAMPLE, "--json", "-"))
    fifo = tmp_path / "svc.pipe"
    os.mkfifo(fifo)
    data = SAMPLE.read_bytes()
    writer = _feed(fifo, gzip.compress(data) if packed else data)
    got = _report(qdebug("replay", fifo, "--json", "-", timeout=120))
    writer.join(timeout=30)
    assert got == want
    cache = Path(os.environ["QDEBUG_CACHE_DIR"])
    assert [p for p in cache.iterdir() if str(fifo) in (p / "manifest.json").read_text()] == []  # the pipe's index: not kept


def test_replay_and_index_only_read_process_substitution(tmp_path):
    want = _report(qdebug("replay", SAMPLE, "--json", "-"))
    exe = os.path.join(os.path.dirname(sys.executable), "qdebug")
    proc = subprocess.run(["bash", "-c", f'"{exe}" replay <(cat "{SAMPLE}") --json -'], capture_output=True, text=True, timeout=120)
    assert _report(proc) == want
    out = tmp_path / "idx"
    proc = subprocess.run(["bash", "-c", f'"{exe}" replay --index-only <(gzip -c "{SAMPLE}") --out "{out}"'],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "indexed 52 lines (33 events, 8 requests)" in proc.stderr
    got = _report(qdebug("replay", out, "--json", "-"))
    assert got["requests"] == want["requests"] and got["findings"] == want["findings"]
