"""Issue 49 items 7, 10, 12, 14 (reader side): `qdebug watch URL` bounds a server's /metrics as `replay --endpoint`
bounds an answer (a whole-answer deadline, `--timeout`; a cap on decoded bytes, `--max-mb`), refuses a sample that is
not a finite count and a watch that is not running, shows every check it counts, and never prints a traceback."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.metrics_text import metrics_server
from tests.servers import Server, free_port

from .watch_run import one_line, run_qdebug

HERE = Path(__file__).resolve().parent
ZEROS = "".join(f'qdebug_watch_{s}_total{{check="{c}"}} 0.0\n' for s in ("checks", "violations", "errors", "check_seconds")
                for c in ("placement", "counts", "positions", "encoder_batch", "layout", "logits"))


def hostile_metrics(tmp: Path, mode: str, mb: int = 64) -> Server:
    """tests/reliability/hostile_metrics_server.py in `mode`, ready on a free loopback port."""
    port = free_port()
    cmd = [sys.executable, str(HERE / "hostile_metrics_server.py"), "--port", str(port), "--mode", mode, "--mb", str(mb)]
    return Server(cmd, port, tmp / f"metrics-{mode}.log").wait_ready()


def _watch_text(tmp: Path, text: str, *options: str):
    """`qdebug watch URL --once OPTIONS` against a loopback server answering `text` on /metrics."""
    with metrics_server(text) as url:
        return run_qdebug(tmp, "watch", url, "--once", *options)


def test_a_trickling_metrics_answer_is_cut_at_the_whole_answer_deadline(tmp_path):
    server = hostile_metrics(tmp_path, "trickle")
    try:
        run = run_qdebug(tmp_path, "watch", server.url, "--once", "--timeout", "3")
    finally:
        server.stop()
    one_line(run, 6, "no complete answer within 3 s", "--timeout")
    assert run.seconds < 30, run.seconds  # one 3 s deadline (and start-up); before, each byte restarted a read timeout


def test_a_gzip_bomb_is_refused_by_its_decompressed_size(tmp_path):
    server = hostile_metrics(tmp_path, "bomb", mb=512)  # 512 MiB of comment lines in about half a MiB of gzip
    try:
        run = run_qdebug(tmp_path, "watch", server.url, "--once", "--max-mb", "16")
    finally:
        server.stop()
    one_line(run, 6, "answer too large", "once decompressed", "--max-mb 16")
    assert run.peak_mib < 400, run.peak_mib  # never held the expanded answer (before: about 3x its size)


@pytest.mark.parametrize("mode", ["big", "endless"])
def test_a_huge_or_endless_answer_is_refused_at_the_default_cap(tmp_path, mode):
    server = hostile_metrics(tmp_path, mode, mb=300)
    try:
        run = run_qdebug(tmp_path, "watch", server.url, "--once", limit=120)
    finally:
        server.stop()
    one_line(run, 6, "answer too large: over 67,108,864 bytes", "--max-mb 64")
    assert run.peak_mib < 400, run.peak_mib


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-Inf", "1.2.3", "--", "1e400", "-4"])
def test_a_sample_that_is_not_a_finite_count_is_one_line(tmp_path, value):
    text = ZEROS.replace('qdebug_watch_violations_total{check="placement"} 0.0', f'qdebug_watch_violations_total{{check="placement"}} {value}')
    run = _watch_text(tmp_path, text)
    line = one_line(run, 2, 'qdebug_watch_violations_total{check=\'placement\'}', "not a finite count")
    assert repr(value) in line, line


def test_an_unknown_check_is_shown_where_it_is_counted(tmp_path):
    text = ZEROS + 'qdebug_watch_violations_total{check="mystery"} 7.0\nqdebug_watch_checks_total{check="[/x]\\"q"} 2\n'
    run = _watch_text(tmp_path, text)
    assert run.code == 1, run.err
    lines = run.out.splitlines()
    assert lines[0].endswith(": 7 violation(s)"), lines
    assert ["mystery", "0", "7", "0", "0.000"] in [ln.split() for ln in lines], lines  # the row the total comes from
    assert any(ln.split()[:2] == ['[/x]"q', "2"] for ln in lines), lines  # a label is data: shown as sent, unescaped
    run = _watch_text(tmp_path, text, "--json", "-")
    doc = json.loads(run.out)
    assert doc["violations"] == sum(row["violations"] for row in doc["checks"].values()) == 7
    assert doc["checks"]["mystery"]["violations"] == 7


def test_a_watch_that_is_not_running_is_said_so(tmp_path):
    run = _watch_text(tmp_path, 'vllm:num_requests_running{model_name="demo"} 0.0\n')  # the plugin exports nothing
    one_line(run, 2, "exports no qdebug_watch_* series", "the watch is not running")
    run = _watch_text(tmp_path, ZEROS + "qdebug_watch_up 0\n")  # the plugin says its watch did not attach
    one_line(run, 2, "qdebug_watch_up is 0", "the watch is not running")
    run = _watch_text(tmp_path, ZEROS + "qdebug_watch_up 1\n")
    assert run.code == 0 and "0 violation(s)" in run.out, run.err


@pytest.mark.parametrize("url", ["http://[::1", "http://127.0.0.1:99999", "http://"])
def test_a_url_that_names_no_server_is_one_line(tmp_path, url):
    one_line(run_qdebug(tmp_path, "watch", url, "--once"), 2, "URL_OR_DIR")


@pytest.mark.parametrize("option, value", [("--timeout", "0"), ("--max-mb", "-1"), ("--timeout", "nan")])
def test_limits_must_be_positive(tmp_path, option, value):
    one_line(run_qdebug(tmp_path, "watch", "http://127.0.0.1:9", "--once", option, value), 2, f"{option} ", "expected a positive")


def test_the_findings_folder_of_a_url_is_read_through_the_same_readers(tmp_path):
    from qdebug.engine.watch_metrics import WatchCounters

    fresh = tmp_path / "fresh"  # a watch that has found nothing yet: counter files, no findings.log
    fresh.mkdir()
    WatchCounters(str(fresh), "run").flush()
    (tmp_path / "empty").mkdir()
    fifo = tmp_path / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / "findings.log")
    with metrics_server(ZEROS) as url:
        ok = run_qdebug(tmp_path, "watch", url, "--findings", fresh, "--once")
        assert ok.code == 0 and "0 violation(s)" in ok.out, ok.err
        one_line(run_qdebug(tmp_path, "watch", url, "--findings", tmp_path / "empty", "--once"), 2, "--findings",
                 "holds no watch counter files")
        one_line(run_qdebug(tmp_path, "watch", url, "--findings", fifo, "--once"), 2, "findings.log is a FIFO")
