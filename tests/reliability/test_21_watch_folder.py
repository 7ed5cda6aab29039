"""Issue 49 items 5, 7, 10, 12, 14, 15 (reader side): `qdebug watch DIR` reads only regular files (a FIFO or a
device is refused, never waited on or read forever), each within a size cap and the reading's deadline, streams the
findings log in bounded memory counting every line, refuses a folder that is no watch folder and counter files that
hold no finite counts; `--json` without `--once` reads once; the live view wants a terminal."""

from __future__ import annotations

import json
import os

import pytest

from qdebug.engine.watch_log import FindingsLog, WatchFinding, format_line, now_iso
from qdebug.engine.watch_metrics import WatchCounters

from .watch_run import one_line, run_qdebug


def _counters(folder, violations: int = 0) -> None:
    """A worker's counter file, written by the plugin's own writer."""
    counters = WatchCounters(str(folder), "run")
    for i in range(10):
        counters.add("placement", seconds=0.001, violations=int(i < violations))
    counters.flush()


def _log_lines(path, count: int, *, request_id: str = "chatcmpl-{i}") -> None:
    """`count` violation lines in the plugin's line format, written in one go."""
    template = WatchFinding("placement", "violation", "sync", "", "item 0 (image): 24 of 24 rows at its placeholders are "
                            "not its own encoder rows: 24 from chatcmpl-donor", donors=["chatcmpl-donor"], host="gpu-3",
                            time=now_iso())
    with open(path, "w") as fh:
        for i in range(count):
            template.request_id = request_id.format(i=i)
            fh.write(format_line(template) + "\n")


def test_a_fifo_or_a_device_in_the_folder_is_refused_not_read(tmp_path):
    fifo = tmp_path / "fifo"
    fifo.mkdir()
    _counters(fifo)
    os.mkfifo(fifo / "findings.log")
    one_line(run_qdebug(tmp_path, "watch", fifo, "--once"), 2, "findings.log is a FIFO", "not a regular file")
    worker = tmp_path / "worker-fifo"
    worker.mkdir()
    os.mkfifo(worker / "metrics-run-1.json")
    one_line(run_qdebug(tmp_path, "watch", worker, "--once"), 2, "metrics-run-1.json is a FIFO")
    zero = tmp_path / "zero"
    zero.mkdir()
    _counters(zero)
    (zero / "findings.log").symlink_to("/dev/zero")
    run = run_qdebug(tmp_path, "watch", zero, "--once")
    one_line(run, 2, "findings.log is a character device")
    assert run.peak_mib < 200, run.peak_mib


def test_a_findings_log_that_is_a_folder_is_one_line(tmp_path):
    (tmp_path / "w").mkdir()
    _counters(tmp_path / "w")
    (tmp_path / "w" / "findings.log").mkdir()
    one_line(run_qdebug(tmp_path, "watch", tmp_path / "w", "--once"), 2, "findings.log is a directory")


def test_a_big_log_is_streamed_every_line_counted_in_bounded_memory(tmp_path):
    folder = tmp_path / "w"
    folder.mkdir()
    count = 160_000  # about 50 MiB of lines, under the default --max-mb 64
    _log_lines(folder / "findings.log", count)
    size = (folder / "findings.log").stat().st_size
    run = run_qdebug(tmp_path, "watch", folder, "--once", "--json", "-", "--timeout", "120", limit=180)
    assert run.code == 1, run.err
    doc = json.loads(run.out)
    assert doc["violations"] == doc["findings_total"] == doc["findings_violations"] == count
    assert [f["request_id"] for f in doc["findings"]] == [f"chatcmpl-{i}" for i in range(count - 50, count)]  # the newest
    assert run.peak_mib < 100, (run.peak_mib, size >> 20)  # before: about 4x the log's size
    one_line(run_qdebug(tmp_path, "watch", folder, "--once", "--max-mb", "8"), 2, "findings.log", "over --max-mb 8")


def test_a_line_longer_than_the_cap_is_counted_and_cut(tmp_path):
    folder = tmp_path / "w"
    folder.mkdir()
    # 1 MiB ids, as a writer from before the fields were capped wrote them (today's format_line caps them)
    line = format_line(WatchFinding("placement", "violation", "sync", "ID", "24 from chatcmpl-donor", time=now_iso()))
    with open(folder / "findings.log", "w") as fh:
        fh.writelines(line.replace("request_id=ID", f"request_id=id-{i}-" + "x" * (1 << 20)) + "\n" for i in range(3))
        fh.write("x" * (3 << 20) + "\n")  # and a long line that is no finding
    run = run_qdebug(tmp_path, "watch", folder, "--once", "--json", "-")
    assert run.code == 1, run.err
    doc = json.loads(run.out)
    assert doc["violations"] == doc["findings_total"] == 3 and run.peak_mib < 150, (doc["violations"], run.peak_mib)
    assert all(f["check"] == "placement" and "line over 64 KiB, cut" in f["evidence"] for f in doc["findings"])


@pytest.mark.parametrize("text, word", [
    ('{"violations": {"placement": NaN}}', "NaN"),
    ('{"violations": {"placement": Infinity}}', "Infinity"),
    ('{"violations": {"placement": 1e400}}', "violations.placement"),
    ('{"checks": {"placement": -3}}', "checks.placement"),
    ('{"clock": {"steps": 1e999}}', "clock.steps"),
    ('{"violations": {"placement": 1' + "0" * 400 + '}}', "violations.placement"),
    ('[1, 2]', "not a counter file"),
    ('{"checks": ', "not a counter file"),
])
def test_a_counter_file_without_finite_counts_is_one_line(tmp_path, text, word):
    folder = tmp_path / "w"
    folder.mkdir()
    (folder / "metrics-run-7.json").write_text(text)
    one_line(run_qdebug(tmp_path, "watch", folder, "--once"), 2, "metrics-run-7.json", word)


def test_an_oversized_counter_file_is_refused(tmp_path):
    folder = tmp_path / "w"
    folder.mkdir()
    (folder / "metrics-run-7.json").write_text('{"checks": {}, "pad": "' + "x" * (2 << 20) + '"}')
    one_line(run_qdebug(tmp_path, "watch", folder, "--once"), 2, "metrics-run-7.json", "over 1 MiB")


def test_a_folder_that_is_no_watch_folder_is_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    one_line(run_qdebug(tmp_path, "watch", tmp_path / "empty", "--once"), 2, "holds no watch counter files", "no findings.log")
    traces = tmp_path / "traces"  # an engine trace folder: traces and their index, nothing the watch writes
    traces.mkdir()
    (traces / "chatcmpl-1.qdt").write_bytes(b"PK\x05\x06" + b"\0" * 18)
    (traces / "index.jsonl").write_text('{"request_id": "chatcmpl-1"}\n')
    one_line(run_qdebug(tmp_path, "watch", traces, "--once"), 2, "holds no watch counter files", "QDEBUG_VLLM_WATCH_DIR")


def test_without_counter_files_the_total_counts_every_logged_violation(tmp_path):
    folder = tmp_path / "w"
    folder.mkdir()
    _log_lines(folder / "findings.log", 60)
    run = run_qdebug(tmp_path, "watch", folder, "--once")
    assert run.code == 1 and run.out.splitlines()[0].endswith(": 60 violation(s)"), run.out
    assert "latest findings (10 of 60)" in run.out and "violation lines (60 of 60 lines)" in run.out, run.out


def test_json_without_once_reads_once_and_the_live_view_wants_a_terminal(tmp_path):
    folder = tmp_path / "w"
    folder.mkdir()
    _counters(folder, violations=2)
    run = run_qdebug(tmp_path, "watch", folder, "--json", "-", limit=60)
    assert run.code == 1, (run.code, run.err)  # before: the live view started with no terminal and never ended
    assert json.loads(run.out)["checks"]["placement"]["violations"] == 2
    one_line(run_qdebug(tmp_path, "watch", folder, limit=60), 2, "the live view needs a terminal", "--once")


def test_the_findings_written_by_the_plugins_writer_are_read_back(tmp_path):
    folder = tmp_path / "w"
    folder.mkdir()
    _counters(folder, violations=1)
    log = FindingsLog(str(folder), 4096)  # rotated at 4 KiB: the rotated file is read first
    for i in range(30):
        log.add(WatchFinding("placement", "violation", "sync", f"r{i}", "24 of 24 rows"))
    log.drain()
    run = run_qdebug(tmp_path, "watch", folder, "--once", "--json", "-")
    doc = json.loads(run.out)
    kept = (folder / "findings.log.1").read_text().count("\n") + (folder / "findings.log").read_text().count("\n")
    assert doc["findings_total"] == kept and doc["findings"][-1]["request_id"] == "r29", doc["findings_total"]
