"""What the watch writes is bounded in bytes whatever the client's ids hold (the flight recorder's snapshots, the
findings log, the recorded traces), every line lost is counted, a watch that failed to attach writes no counters, and
hostile counter files never reach /metrics (issue 49, items 1, 2, 4, 7, 11, 15)."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from types import SimpleNamespace

import pytest

from qdebug.engine import watch_flight, watch_log
from qdebug.engine.trace_dir import TraceDir
from qdebug.engine.watch_flight import FlightRecorder
from qdebug.engine.watch_log import FindingsLog, WatchFinding, format_line, parse_line, read_findings
from qdebug.engine.watch_metrics import WatchCounters, read_counters
from qdebug.engine.watch_settings import WatchSettings, watch_on
from qdebug.vocab import WatchCheck

MB = 1 << 20
MAX_LINE_BYTES = getattr(watch_log, "MAX_LINE_BYTES", 8192)  # the bounds these tests hold (read where they are set)
MAX_ID_CHARS = getattr(watch_flight, "MAX_ID_CHARS", 128)
MAX_SNAPSHOT_BYTES = getattr(watch_flight, "MAX_SNAPSHOT_BYTES", 512 << 10)
MAX_SNAPSHOTS = getattr(watch_flight, "MAX_SNAPSHOTS", 64)
MAX_FLIGHT_BYTES = getattr(watch_flight, "MAX_FLIGHT_BYTES", 16 << 20)


def _steps(recorder: FlightRecorder, ids: list[str], n: int) -> None:
    for _ in range(n):
        recorder.note_step(SimpleNamespace(num_scheduled_tokens=dict.fromkeys(ids, 7)))


def test_a_flight_snapshot_of_hostile_ids_is_small_and_written_off_the_step(tmp_path):
    """Four clients with 64 KiB request ids in every one of the ring's 256 steps: before, the step itself wrote a
    64 MiB snapshot; now the step hands 256 references over and the snapshot holds cut ids within its bound."""
    recorder = FlightRecorder(SimpleNamespace(), str(tmp_path))
    hostile = [f"{i}-" + "x" * (64 << 10) for i in range(4)]
    _steps(recorder, hostile, 256)
    start = time.perf_counter()
    recorder.snapshot(hostile[0], hostile[:2])
    in_step = time.perf_counter() - start
    recorder.drain()
    [snap] = tmp_path.glob("flight-*.json")
    assert in_step < 0.05, in_step  # the old snapshot serialised 64 MiB here (about a second)
    assert snap.stat().st_size <= MAX_SNAPSHOT_BYTES, snap.stat().st_size
    doc = json.loads(snap.read_text())
    cut = f"…[+{len(hostile[0]) - MAX_ID_CHARS} chars]"
    assert doc["request_id"] == hostile[0][:MAX_ID_CHARS] + cut and doc["traced"][1].endswith(cut)
    assert doc["steps"] and doc["steps"][-1]["step"] == 256 and doc["steps_left_out"] + len(doc["steps"]) == 256
    assert all(len(rid) == MAX_ID_CHARS + len(cut) for s in doc["steps"] for rid in s["requests"])


def test_the_flight_snapshots_of_a_folder_are_bounded_and_nothing_else_is_removed(tmp_path):
    recorder = FlightRecorder(SimpleNamespace(), str(tmp_path))
    user = tmp_path / "elsewhere.json"
    user.write_text("a user's file")
    (tmp_path / "flight-notes.json").write_text("a user's notes")
    os.symlink(user, tmp_path / "flight-20000101T000000-1-link.json")  # named as a snapshot, but a link: never removed
    wide = [f"client-{i}-" + "y" * 3000 for i in range(40)]  # each snapshot near its 512 KiB bound
    for k in range(MAX_FLIGHT_BYTES // MAX_SNAPSHOT_BYTES + 8):
        _steps(recorder, wide, 256)
        recorder.snapshot(f"r{k}", [f"r{k}"])
        recorder.drain()
    snaps = [p for p in tmp_path.glob("flight-2*.json") if not p.is_symlink()]
    sizes = [p.stat().st_size for p in snaps]
    assert len(snaps) <= MAX_SNAPSHOTS and sum(sizes) <= MAX_FLIGHT_BYTES, (len(snaps), sum(sizes))
    assert max(sizes) > MAX_SNAPSHOT_BYTES // 2  # the bound was reached by size, not by count
    newest = max(snaps, key=lambda p: p.stat().st_mtime_ns)
    assert json.loads(newest.read_text())["request_id"] == f"r{MAX_FLIGHT_BYTES // MAX_SNAPSHOT_BYTES + 7}"
    assert user.read_text() == "a user's file" and (tmp_path / "flight-notes.json").read_text() == "a user's notes"
    assert (tmp_path / "flight-20000101T000000-1-link.json").is_symlink()


def _hostile(n: int, tag: str) -> str:
    return f"{tag}-" + "\U0001f600" * n  # four UTF-8 bytes, twelve percent-encoded: the widest a character gets


def test_one_client_with_huge_ids_cannot_rotate_the_others_findings_away(tmp_path):
    """QDEBUG_VLLM_WATCH_LOG_MB=1: before, one 1 MB request id wrote 1 MB lines and rotated every earlier finding
    out of findings.log and findings.log.1; now each field is cut (saying by how much) and a line is bounded."""
    log = FindingsLog(str(tmp_path), MB)
    for i in range(10):
        log.add(WatchFinding("placement", "violation", "sync", f"chatcmpl-{i}", "24 of 24 rows from chatcmpl-x"))
    huge = "r" * MB
    for k in range(3):
        log.add(WatchFinding("placement", "violation", "sync", f"{k}{huge}", "e" * MB, client_id=huge,
                             donors=[f"{j}{huge}" for j in range(40)], cobatched=[_hostile(MB // 4, str(j)) for j in range(40)],
                             trace=f"traces/{huge}.qdt", host=huge))
    log.drain()
    lines = [line for p in tmp_path.glob("findings.log*") for line in p.read_bytes().splitlines()]
    assert max(len(line) for line in lines) <= MAX_LINE_BYTES, max(len(line) for line in lines)
    found = read_findings(str(tmp_path))
    assert [f.request_id for f in found[:10]] == [f"chatcmpl-{i}" for i in range(10)]
    assert len(found) == 13
    last = found[-1]
    kept = last.request_id.partition("…")[0]
    assert kept and f"2{huge}".startswith(kept) and last.request_id.endswith(f"…[+{MB + 1 - len(kept)} chars]")
    assert last.donors[-1].startswith("…[+") and last.donors[-1].endswith(" more]") and len(last.donors) <= 33
    assert last.cobatched[0].endswith(" chars]") and last.evidence.endswith(f"…[+{MB - 600} chars]")
    assert last.host.endswith(" chars]") and last.client_id.endswith(" chars]") and last.trace.endswith(" chars]")


def test_the_widest_line_is_within_its_bound_and_reads_back():
    """Every field as wide as a character gets (an emoji: twelve bytes percent-encoded; a lone surrogate: six bytes
    escaped) and longer than its cap: the line still fits MAX_LINE_BYTES."""
    for wide in ("\U0001f600", "\ud800"):
        def big(tag: str) -> str:
            return tag + wide * 5000

        f = WatchFinding(big("c"), big("o"), big("s"), big("r"), wide * 9000 + "\x00", client_id=big("i"),
                         donors=[big(str(j)) for j in range(99)], cobatched=[big(str(j)) for j in range(99)], trace=big("t"),
                         host=big("h"), time=wide * 5000)
        line = format_line(f)
        assert len(line.encode("utf-8", errors="backslashreplace")) <= MAX_LINE_BYTES
        back = parse_line(line)
        assert back is not None and back.request_id.startswith("r" + wide.encode("utf-8", "backslashreplace").decode()) and back.request_id.endswith(" chars]")
        assert len(f.request_id) == 5001  # the caller's finding is left as it was (format_line caps a copy)


def _bare_runner() -> SimpleNamespace:
    """A runner with no model behind it: what the Watcher reads at construction (no layers, no vision config)."""
    return SimpleNamespace(model=SimpleNamespace(model=SimpleNamespace(layers=[])), model_config=SimpleNamespace(hf_config=SimpleNamespace()))


def test_lines_lost_to_write_errors_are_counted_and_said_once(tmp_path, caplog, monkeypatch):
    """findings.log a link to a user's file and the placement check forced to raise: before, vLLM's log said "not
    written" once per line and qdebug_watch_findings_dropped_total stayed 0; now every lost line is counted, reaches
    the counters file, and the log says it once (then once a minute with the count)."""
    from qdebug.engine.watch_engine import Watcher

    user = tmp_path / "users-file.log"
    user.write_text("the user's own log\n")
    folder = tmp_path / "watch"
    folder.mkdir()
    os.symlink(user, folder / "findings.log")
    watcher = Watcher(_bare_runner(), WatchSettings(sample=0.0, folder=str(folder), log_bytes=MB,
                                                    raising=frozenset({WatchCheck.PLACEMENT.value}), run="r1"))
    with caplog.at_level(logging.WARNING, logger="vllm.qdebug"):
        for i in range(3):
            watcher.run(WatchCheck.PLACEMENT, f"req-{i}", lambda: [])
        watcher.findings.drain()
        monkeypatch.setattr(watch_log, "QUIET_SECONDS", 0.0, raising=False)
        watcher.run(WatchCheck.PLACEMENT, "req-3", lambda: [])
        watcher.findings.drain()
    watcher.counters.flush()
    assert read_counters(str(folder), "r1")["dropped"] == 4
    assert read_counters(str(folder), "r1")["errors"]["placement"] == 4
    said = [r.getMessage() for r in caplog.records if "findings log" in r.getMessage()]
    assert len(said) == 2 and "not written" in said[0] and "3 more lines not written" in said[1], said
    assert user.read_text() == "the user's own log\n" and (folder / "findings.log").is_symlink()


def test_a_watch_that_failed_to_attach_writes_no_counters(tmp_path, monkeypatch):
    """Before, the counters' thread started in the constructor: a watch that failed past it (no model to wrap) wrote
    an all-zero counter file, and /metrics served all-zero series as if it watched."""
    from qdebug.engine.watch_engine import attach_watch
    from qdebug.engine.watch_metrics import FLUSH_SECONDS

    folder = tmp_path / "watch"
    monkeypatch.setenv("QDEBUG_VLLM_WATCH_DIR", str(folder))
    with pytest.raises(AttributeError):
        attach_watch(_bare_runner())  # no execute_model: install fails, as the plugin's load_model then logs
    time.sleep(FLUSH_SECONDS * 3)
    assert not list(folder.glob("metrics-*.json")) and read_counters(str(folder))["workers"] == 0
    blocker = tmp_path / "a-file"
    blocker.write_text("the user's file")
    for where in (blocker, tmp_path / "dangling"):
        if where.name == "dangling":
            os.symlink(tmp_path / "nowhere" / "x", where)
        monkeypatch.setenv("QDEBUG_VLLM_WATCH_DIR", str(where))
        with pytest.raises(OSError):
            attach_watch(_bare_runner())
    assert blocker.read_text() == "the user's file" and not (tmp_path / "nowhere").exists()


def test_hostile_counter_files_are_skipped_and_said_once(tmp_path, caplog):
    """Before, `"dropped": 1e400` raised out of read_counters (vLLM's whole /metrics answered 400), NaN and Infinity
    were summed, a FIFO hung the reader; now each is skipped, said once, and the workers' own files still count."""
    good = WatchCounters(str(tmp_path), "r1")
    good.path = str(tmp_path / "metrics-r1-1.json")
    good.add("placement", seconds=0.5, violations=1)
    good.set_dropped(2)
    good.flush()
    bad = {2: '{"dropped": 1e400}', 3: '{"checks": {"placement": NaN}}', 4: '{"seconds": {"counts": Infinity}}',
           5: '{"checks": {"placement": "7"}}', 6: '{"violations": {"placement": ' + "9" * 400 + "}}", 7: '{"dropped": -3}',
           8: "[" * 100_000 + "]" * 100_000, 9: "[1, 2]", 10: '{"clock": {"steps": true}}', 11: '{"checks": []}',
           12: '{"clock": {"steps": 1e300}}', 13: " " * (1 << 20) + "{}"}
    for pid, text in bad.items():
        (tmp_path / f"metrics-r1-{pid}.json").write_text(text)
    os.mkfifo(tmp_path / "metrics-r1-14.json")
    os.symlink(tmp_path / "metrics-r1-1.json", tmp_path / "metrics-r1-15.json")
    got: list = []
    with caplog.at_level(logging.WARNING, logger="vllm.qdebug"):
        reader = threading.Thread(target=lambda: got.extend([read_counters(str(tmp_path), "r1"), read_counters(str(tmp_path), "r1")]),
                                  daemon=True)
        reader.start()
        reader.join(30)
    assert len(got) == 2, "read_counters hung (a FIFO)"
    for counters in got:
        assert counters["workers"] == 1 and counters["dropped"] == 2 and counters["violations"]["placement"] == 1
        assert counters["checks"]["placement"] == 1 and counters["seconds"]["counts"] == 0.0
    skipped = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert len(skipped) == len(bad) + 2 and all("expected a worker's counter file" in m for m in skipped), skipped


def test_watch_on_accepts_common_words_and_says_an_unknown_value(monkeypatch, caplog):
    said = []
    with caplog.at_level(logging.ERROR, logger="vllm.qdebug"):
        for value, on in (("enable", True), ("1", True), (" Yes ", True), ("ON", True), ("0", False), ("off", False), ("", False),
                          ("maybe", False), ("maybe", False)):
            monkeypatch.setenv("QDEBUG_VLLM_WATCH", value)
            assert watch_on() is on, value
            said.append(len(caplog.records))
    assert said[-3:] == [0, 1, 1]  # the unknown value said once, the known ones never
    text = caplog.records[0].getMessage()
    assert "QDEBUG_VLLM_WATCH='maybe'" in text and "1, true, yes, on, enable" in text and "the watch is off" in text


def test_a_recorded_trace_is_not_kept_past_the_folders_bound(demo_trace, tmp_path):
    """The flight recorder's bound held only before a recording: its traces could overshoot by a whole recording
    (1.40 MB against 1 MB); now the writer checks each trace against it, counting the index too."""
    from qdebug.engine.trace_dir import TraceBoundError, trace_bytes
    from qdebug.engine.vllm_tracer import TraceWriter

    trace, _ = demo_trace
    folder = TraceDir(tmp_path / "traces")
    first = folder.write(trace, "one", {"request_id": "one"})
    one = trace_bytes(folder.root)
    limit = int(one * 2.5)
    writer = TraceWriter(lambda req, generated: (trace, {"request_id": req.req_id}), folder)
    for i in range(5):
        writer.submit(SimpleNamespace(req_id=f"r{i}", name=f"r{i}"), [], limit)
    writer.submit(SimpleNamespace(req_id="tagged", name="tagged"), [])  # a client's tagged trace: no bound of the watch's
    writer.drain()
    names = sorted(p.name for p in folder.root.iterdir())
    assert names == sorted(["index.jsonl", first.name, "r0.qdt", "tagged.qdt"]), names  # r1 would pass 2.5 traces
    assert trace_bytes(folder.root) - (folder.root / "tagged.qdt").stat().st_size <= limit + 200
    with pytest.raises(TraceBoundError):
        folder.write(trace, "again", {"request_id": "again"}, limit=trace_bytes(folder.root))
    assert not [p for p in folder.root.iterdir() if p.name.startswith(".")]  # no temporary left behind


def test_the_counters_never_write_through_a_link(tmp_path):
    """The counter file is written beside and renamed into place; a link planted at the temporary's name (or at the
    file's) is replaced, never followed: the user's file it points to stays as it was."""
    user = tmp_path / "users-file"
    user.write_text("the user's own data")
    folder = tmp_path / "watch"
    folder.mkdir()
    counters = WatchCounters(str(folder), "r1")
    os.symlink(user, counters.path + ".tmp")
    counters.add("counts", seconds=0.1)
    counters.flush()
    os.unlink(counters.path)
    os.symlink(user, counters.path)
    counters.add("counts", seconds=0.1)
    counters.flush()
    assert user.read_text() == "the user's own data"
    assert read_counters(str(folder), "r1")["checks"]["counts"] == 2 and not os.path.islink(counters.path)
