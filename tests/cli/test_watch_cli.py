"""`qdebug watch URL_OR_DIR --once` for scripts: exit 1 when violations exist, 0 when none, 2 for a source that is not
one, 6 for a server that cannot be reached; `--json -` puts the snapshot alone on stdout."""

from __future__ import annotations

import json

import pytest

from qdebug.engine.watch_log import FindingsLog, WatchFinding
from qdebug.engine.watch_metrics import WatchCounters
from tests.metrics_text import metrics_server
from tests.servers import free_port

from .installed import qdebug


def _folder(path, violations: int):
    path.mkdir()
    counters = WatchCounters(str(path), "run")
    for i in range(20):
        counters.add("placement", seconds=0.002, violations=int(i < violations))
    counters.add("counts", seconds=0.001)
    counters.flush()
    log = FindingsLog(str(path), 1 << 20)
    for i in range(violations):
        log.add(WatchFinding("placement", "violation", "sync", f"req-{i}", "24 of 24 rows ...", donors=[f"req-{i + 1}"]))
    log.drain()


def test_a_folder_with_violations_exits_1_and_its_json_lists_them(tmp_path):
    _folder(tmp_path / "w", 3)
    code, out, err = qdebug(tmp_path, "watch", tmp_path / "w", "--once", "--json", "-")
    assert code == 1, err
    doc = json.loads(out)
    assert doc["violations"] == 3 and doc["checks"]["placement"] == {"checks": 20, "violations": 3, "errors": 0, "seconds": pytest.approx(0.04)}
    assert [f["request_id"] for f in doc["findings"]] == ["req-0", "req-1", "req-2"] and doc["findings"][0]["donors"] == ["req-1"]
    assert doc["checks"]["counts"]["checks"] == 1 and set(doc["checks"]) == {"placement", "counts", "positions", "encoder_batch", "layout", "logits", "cache"}


def test_a_clean_folder_exits_0_with_the_table(tmp_path):
    _folder(tmp_path / "w", 0)
    code, out, err = qdebug(tmp_path, "watch", tmp_path / "w", "--once")
    assert code == 0, err
    assert "0 violation(s)" in out and any(line.split()[:3] == ["placement", "20", "0"] for line in out.splitlines()), out


def test_the_workers_clock_says_what_the_watch_costs_in_json_and_text(tmp_path):
    from qdebug.engine.plugin_clock import PluginClock

    (tmp_path / "w").mkdir()
    clock = PluginClock()
    clock.steps, clock.step_seconds, clock.own_seconds = 400, 1.02, 0.02
    WatchCounters(str(tmp_path / "w"), "run", clock).flush()
    code, out, err = qdebug(tmp_path, "watch", tmp_path / "w", "--once", "--json", "-")
    assert code == 0, err
    worker = json.loads(out)["worker"]
    assert worker == {"steps": 400, "step_seconds": 1.02, "plugin_seconds": 0.02, "plugin_share": pytest.approx(0.02)}
    code, out, err = qdebug(tmp_path, "watch", tmp_path / "w", "--once")
    assert code == 0 and "plugin cost: 0.020 s in 400 worker steps against vLLM's own 1.000 s: the step loop runs 2.0% longer" in out, out


def test_a_source_that_is_neither_exits_2_with_one_line(tmp_path):
    code, out, err = qdebug(tmp_path, "watch", tmp_path / "nothing-here", "--once")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "not a server URL" in err, err


def test_an_unreachable_server_exits_6(tmp_path):
    code, _, err = qdebug(tmp_path, "watch", f"http://127.0.0.1:{free_port()}", "--once")
    assert code == 6 and err.startswith("qdebug: error: cannot reach") and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("text, code", [
    ('# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name="demo"} 0.0\n', 2),
    ('qdebug_watch_checks_total{check="placement"} 120.0\nqdebug_watch_violations_total{check="placement"} 0.0\n'
     'qdebug_watch_errors_total{check="placement"} 0.0\nqdebug_watch_check_seconds_total{check="placement"} 0.01\n', 0),
    ('qdebug_watch_checks_total{check="placement"} 120.0\nqdebug_watch_violations_total{check="placement"} 4.0\n', 1),
])
def test_a_servers_metrics_decide_the_exit(tmp_path, text, code):
    with metrics_server(text) as url:
        got, out, err = qdebug(tmp_path, "watch", url, "--once", "--json", "-")
    assert got == code, err
    if code == 0:  # a server that exports no clock (an older plugin): no share, said as null
        assert json.loads(out)["worker"]["plugin_share"] is None
    if code == 2:
        assert "exports no qdebug_watch_* series" in err and len(err.strip().splitlines()) == 1
    else:
        assert json.loads(out)["checks"]["placement"]["checks"] == 120


def test_the_cache_checks_reads_are_shown_by_cache_from_a_folder_and_a_server(tmp_path):
    """Legitimate and unverified reads are no violation: the cache check's row counts every read it judged and the
    `cache reads` line (`cache_reads` in --json) says what each cache served, unverified reads included."""
    folder = tmp_path / "w"
    folder.mkdir()
    counters = WatchCounters(str(folder), "run")
    counters.add("cache", seconds=0.001, checks=5)
    counters.add_reads(["prefix_cache/same_content"] * 3 + ["processor_cache/same_content", "kv_connector/unverified"])
    counters.flush()
    text = ('qdebug_watch_checks_total{check="cache"} 5.0\nqdebug_watch_violations_total{check="cache"} 0.0\n'
            'qdebug_watch_cache_reads_total{cache="prefix_cache",reuse="same_content"} 3.0\n'
            'qdebug_watch_cache_reads_total{cache="processor_cache",reuse="same_content"} 1.0\n'
            'qdebug_watch_cache_reads_total{cache="kv_connector",reuse="unverified"} 1.0\n'
            'qdebug_watch_cache_reads_total{cache="encoder_cache",reuse="other_content"} 0.0\n'
            'qdebug_watch_cache_reads_total{cache="a[red]b",reuse="same_content"} 9.0\n')
    with metrics_server(text) as url:
        for source in (folder, url):
            code, out, err = qdebug(tmp_path, "watch", source, "--once", "--json", "-")
            doc = json.loads(out)
            assert code == 0 and doc["violations"] == 0 and doc["checks"]["cache"]["checks"] == 5, (source, out, err)
            assert list(doc["cache_reads"].items()) == [("processor_cache", {"same_content": 1, "other_content": 0, "unverified": 0}),
                                                        ("prefix_cache", {"same_content": 3, "other_content": 0, "unverified": 0}),
                                                        ("kv_connector", {"same_content": 0, "other_content": 0, "unverified": 1})], (source, doc)
            code, out, err = qdebug(tmp_path, "watch", source, "--once")
            assert code == 0 and ("cache reads: processor_cache 1 same content, 0 other content, 0 unverified; prefix_cache 3 "
                                  "same content, 0 other content, 0 unverified; kv_connector 0 same content, 0 other content, "
                                  "1 unverified") in out, out


def test_once_says_each_findings_trace_or_why_it_has_none(tmp_path):
    """A recorded trace is named where it is (relative to the folder); a layout violation says its check runs after the
    step's decoder; a placement violation the recorder left out says it was not recorded; never a bare `-`."""
    (tmp_path / "w").mkdir()
    WatchCounters(str(tmp_path / "w"), "run").flush()
    log = FindingsLog(str(tmp_path / "w"), 1 << 20)
    log.add(WatchFinding("layout", "violation", "layer.2", "req-l", "layer 2's attention kernel received its value rows head-first"))
    log.add(WatchFinding("placement", "violation", "sync", "req-p", "24 of 24 rows ...", donors=["req-q"], trace="traces/req-p.qdt"))
    log.add(WatchFinding("placement", "violation", "sync", "req-r", "24 of 24 rows ...", donors=["req-q"]))
    log.drain()
    code, out, err = qdebug(tmp_path, "watch", tmp_path / "w", "--once")
    assert code == 1, err
    said = [line.strip() for line in out.splitlines() if line.startswith("    ")]
    assert said == ["no trace: this check runs after the step's decoder; the recorder traces the next new requests instead",
                    "traces/req-p.qdt",
                    "no trace: not recorded; one recording per 5 s, and a prompt begun in an earlier step cannot be"], out
