"""Servers that fail: 500s, one that dies mid-burst, one that never answers, one that wants a key, none at all."""

import zipfile

from .conftest import fault_server, free_port, load_json, run_qdebug, small_capture


def _odd(capture) -> dict:
    """Which requests the fault server fails: those whose text asks a question."""
    from qdebug.replay.formats.capture import parse_capture

    return {r.request_id: "?" in r.request.prompt_text for r in parse_capture(capture).requests}


def _all_read(port: int) -> bool:
    """Whether every loopback TCP connection to `port` has nothing unread or unacknowledged (the kernel's queues in
    /proc/net/tcp: the server's send queue and the client's receive queue both empty)."""
    from pathlib import Path

    rows = [line.split() for line in Path("/proc/net/tcp").read_text().splitlines()[1:]]
    ours = [r for r in rows if int(r[1].split(":")[1], 16) == port or int(r[2].split(":")[1], 16) == port]
    return bool(ours) and all(r[4] == "00000000:00000000" for r in ours if r[3] == "01")  # 01: ESTABLISHED


def _one_line_failure(result):
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout


def test_http_500_is_an_error_per_request_after_retries(tmp_path):
    capture = small_capture(tmp_path, 6)
    odd = _odd(capture)
    assert any(odd.values()) and not all(odd.values())
    server = fault_server(tmp_path, "500", healthy=6)
    try:
        out = tmp_path / "r.json"
        result = run_qdebug("replay", str(capture), "--endpoint", server.url, "--concurrency", "3", "--retries", "1", "--json", str(out))
    finally:
        server.stop()
    assert result.returncode == 1
    _one_line_failure(result)
    for r in load_json(out)["requests"]:
        if odd[r["id"]]:
            assert r["verdict"] == "error" and r["error"] == "server error HTTP 500: engine overloaded (after 2 attempts)", r
        else:
            assert r["verdict"] == "ok" and r["burst_answers"] == [r["reference"]], r  # the rest are still compared


def test_a_server_that_dies_mid_burst(tmp_path):
    capture = small_capture(tmp_path, 5)
    server = fault_server(tmp_path, "die", healthy=5)
    try:
        out = tmp_path / "r.json"
        result = run_qdebug("replay", str(capture), "--endpoint", server.url, "--concurrency", "1", "--retries", "1", "--json", str(out))
    finally:
        server.stop()
    assert result.returncode == 1
    _one_line_failure(result)
    doc = load_json(out)
    verdicts = [r["verdict"] for r in doc["requests"]]
    assert verdicts[:2] == ["ok", "ok"] and verdicts[2:] == ["error"] * 3, verdicts
    assert all(r["error"].startswith("connection failed") for r in doc["requests"][2:])
    assert doc["counts"]["contaminated"] == 0 and doc["counts"]["errors"] == 3


def test_a_server_that_never_answers_times_out(tmp_path):
    capture = small_capture(tmp_path, 4)
    odd = _odd(capture)
    server = fault_server(tmp_path, "hang", healthy=4)
    try:
        out = tmp_path / "r.json"
        result = run_qdebug("replay", str(capture), "--endpoint", server.url, "--concurrency", "4", "--timeout", "3", "--json", str(out), timeout=120)
    finally:
        server.stop()
    assert result.returncode == 1
    _one_line_failure(result)
    for r in load_json(out)["requests"]:
        if odd[r["id"]]:
            assert r["verdict"] == "error" and r["error"] == "timeout: no answer within 3 s", r
        else:
            assert r["verdict"] == "ok", r


def test_unreachable_server_is_one_line(tmp_path):
    capture = small_capture(tmp_path, 2)
    out = tmp_path / "r.json"
    result = run_qdebug("replay", str(capture), "--endpoint", f"http://127.0.0.1:{free_port()}", "--json", str(out), timeout=60)
    assert result.returncode == 6  # a server that cannot be reached has its own code (1 is a finding)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("qdebug: error: cannot reach http://127.0.0.1:") and "is the server running?" in lines[0]
    assert not out.exists()
    bad = run_qdebug("replay", str(capture), "--endpoint", "ftp://x", timeout=60)
    assert bad.returncode == 2 and bad.stderr.startswith("qdebug: error: --endpoint ftp://x: expected an http(s) URL")
    local_only = run_qdebug("replay", str(capture), "--endpoint", "http://127.0.0.1:1", "--inject", "shared-visual-buffer", timeout=60)
    assert local_only.returncode == 2 and "qdebug serve --inject" in local_only.stderr and len(local_only.stderr.strip().splitlines()) == 1
    unset = run_qdebug("replay", str(capture), "--endpoint", "http://127.0.0.1:1", "--api-key-env", "QDEBUG_TEST_NO_SUCH_VAR", timeout=60)
    assert unset.returncode == 2 and "QDEBUG_TEST_NO_SUCH_VAR" in unset.stderr and "not set" in unset.stderr


def test_the_api_key_is_sent_but_never_shown_or_written(tmp_path):
    key = "sk-qdebug-test-5ecret-7f3a9c"
    capture = small_capture(tmp_path, 3)
    server = fault_server(tmp_path, "auth", key=key)
    try:
        out, saved = tmp_path / "r.json", tmp_path / "r.qdr"
        ok = run_qdebug("replay", str(capture), "--endpoint", server.url, "--api-key-env", "QDEBUG_TEST_KEY", "--json", str(out), "--save", str(saved),
                        env={"QDEBUG_TEST_KEY": key})
        wrong = run_qdebug("replay", str(capture), "--endpoint", server.url, "--api-key-env", "QDEBUG_TEST_KEY", env={"QDEBUG_TEST_KEY": key + "-wrong"})
    finally:
        server.stop()
    assert ok.returncode == 0, ok.stderr
    assert all(r["verdict"] == "ok" for r in load_json(out)["requests"])
    assert wrong.returncode == 6  # a server that refuses the key cannot be used: not a finding (1)
    lines = wrong.stderr.strip().splitlines()
    assert len(lines) == 1 and "HTTP 401" in lines[0] and "invalid key" in lines[0]  # the server's own message...
    for text in (ok.stdout, ok.stderr, wrong.stdout, wrong.stderr, out.read_text()):
        assert key not in text  # ...with the key redacted even where the server echoed it
    with zipfile.ZipFile(saved) as zf:
        assert all(key.encode() not in zf.read(name) for name in zf.namelist())


def test_ctrl_c_stops_and_reports_what_finished(tmp_path):
    import signal
    import subprocess
    import time

    capture = small_capture(tmp_path, 4)
    odd = _odd(capture)
    server = fault_server(tmp_path, "hang", healthy=4)
    out = tmp_path / "r.json"
    try:
        proc = subprocess.Popen(["qdebug", "replay", str(capture), "--endpoint", server.url, "--concurrency", "4", "--timeout", "300", "--json", str(out)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        log = tmp_path / "fault-hang.log"
        deadline = time.monotonic() + 120
        # Wait until the references (4) and the whole burst (4: two hang, two are answered) have reached the server, and
        # every byte the server sent has been read by the client: the two statements' answers are in its hands.
        while time.monotonic() < deadline and proc.poll() is None and not (
                log.read_text().count("request ") >= 4 + 4 and _all_read(server.port)):
            time.sleep(0.1)
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        server.stop()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "interrupted" in stderr
    doc = load_json(out)
    assert doc["interrupted"] is True
    for r in doc["requests"]:
        if odd[r["id"]]:
            assert r["verdict"] == "error" and r["error"] == "interrupted before it answered", r
        else:
            assert r["verdict"] == "ok", r
