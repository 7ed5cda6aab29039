"""`qdebug serve` over real HTTP: traced answers, the injected shared buffer found by `replay --endpoint`, refusals."""

import json

import httpx
import pytest
from typer.testing import CliRunner

from qdebug.cli import app

from .conftest import SAMPLE, load_json, qdebug_server, run_qdebug, small_capture


@pytest.fixture(scope="module")
def buggy(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("buggy")
    server = qdebug_server(tmp, inject="shared-visual-buffer", seed=1)
    yield server, tmp
    server.stop()


def _index(tmp):
    return [json.loads(line) for line in (tmp / "traces" / "index.jsonl").read_text().splitlines()]


def test_shared_buffer_contamination_is_found_with_the_right_donor(buggy, tmp_path):
    """Which rows a request reads from the shared buffer is the waves' timing; when they mix several requests' rows,
    the answer reads like no one's isolated answer and no donor can be named from text: up to three replays until
    one names a donor by an exact answer. Every replay is held to no false alarm."""
    server, tmp = buggy
    for attempt in range(3):
        out = tmp_path / f"r{attempt}.json"
        result = run_qdebug("replay", str(SAMPLE / "capture.jsonl"), "--endpoint", server.url, "--concurrency", "4", "--json", str(out))
        doc = load_json(out)
        index = {line["client_request"]: line for line in _index(tmp)}  # the latest line of each: this replay's
        # The isolated references ran alone: a wave of one, nobody else's rows.
        assert all(index[f"{r['id']}/reference"]["donors"] == [] for r in doc["requests"])
        references = {r["id"]: r["reference"] for r in doc["requests"]}
        checked = 0
        for r in doc["requests"]:
            if r["verdict"] != "contaminated":
                continue
            served = index[f"{r['id']}/burst-1"]
            # No false alarm: the server's own record says this request read someone else's rows.
            assert served["donors"], (r, served)
            named = r["burst_donors"][0]
            if not named or any(r["burst_answers"][0] != references[d] for d in named):
                continue  # a donor named by a near answer: rows mixed from several requests can read like a third's
            # An exact answer names a true donor: when several requests answer alike alone (which ones do depends on the
            # waves, hence on timing), the server's record of whose rows it read is one of them.
            assert {index[f"{d}/burst-1"]["id"] for d in named} & set(served["donors"]), (r, served)
            checked += 1
        if checked:
            break
    assert result.returncode == 1, result.stderr  # contaminated requests: replay exits 1
    assert checked >= 1, [(r["id"], r["verdict"], r["burst_donors"]) for r in doc["requests"]]
    assert doc["counts"]["requests_contaminated"] >= checked
    # Requests were served concurrently: several reached the sync step inside one wave.
    waves = [line["wave"] for line in index.values() if line["client_request"].endswith("burst-1")]
    assert max(waves.count(w) for w in set(waves)) >= 2
    # Every answer left a trace that loads for repl/diff.
    from qdebug.trace.schema import load_trace

    trace = load_trace(tmp / "traces" / index["req-01/reference"]["trace"])
    assert trace.generated_text == index["req-01/reference"]["answer"]


def test_clean_server_is_all_ok_on_the_arrival_schedule(tmp_path):
    server = qdebug_server(tmp_path, inject="none")
    try:
        capture = small_capture(tmp_path, 5)
        out = tmp_path / "r.json"
        key = "sk-qdebug-serve-test-91c2"
        result = run_qdebug("replay", str(capture), "--endpoint", server.url + "/v1", "--speed", "20", "--repeat", "2", "--json", str(out),
                            "--api-key-env", "QDEBUG_TEST_KEY", env={"QDEBUG_TEST_KEY": key})
        assert result.returncode == 0, result.stderr
        files = [p for p in (tmp_path / "traces").iterdir()]
        assert len(files) == 1 + 5 * 3  # index.jsonl and a trace per answer (isolated + two bursts)
        import zipfile

        for path in [*files, out]:
            members = [zipfile.ZipFile(path).read(n) for n in zipfile.ZipFile(path).namelist()] if zipfile.is_zipfile(path) else [path.read_bytes()]
            assert all(key.encode() not in m for m in members), path
        assert key not in result.stdout + result.stderr
        doc = load_json(out)
        assert doc["repeats"] == 2 and doc["schedule"] == "arrival_ts / 20"
        for r in doc["requests"]:
            assert r["verdict"] == "ok" and r["burst_verdicts"] == ["ok", "ok"] and r["burst_answers"] == [r["reference"]] * 2, r
            assert r["first_token_kl"] is not None and r["first_token_kl"] < 1e-6 and r["first_token_topk_overlap"] == 1.0
        assert doc["counts"]["contaminated"] == 0
        # OpenAI-style refusals with the server's own message.
        bad = httpx.post(f"{server.url}/v1/chat/completions", json={"model": "other", "messages": [{"role": "user", "content": "hi"}]}, timeout=30)
        assert bad.status_code == 404 and "not served here" in bad.json()["error"]["message"]
        stream = httpx.post(f"{server.url}/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}], "stream": True}, timeout=30)
        assert stream.status_code == 400 and "stream" in stream.json()["error"]["message"]
        empty = httpx.post(f"{server.url}/v1/chat/completions", json={"messages": []}, timeout=30)
        assert empty.status_code == 400 and "messages" in empty.json()["error"]["message"]
    finally:
        server.stop()


def test_serve_refuses_bad_options_in_one_line(tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["serve", "--inject", "bogus"])
    assert result.exit_code == 2 and result.output.startswith("qdebug: error: --inject bogus")
    (tmp_path / "file").write_text("x")
    result = runner.invoke(app, ["serve", "--traces", str(tmp_path / "file")])
    assert result.exit_code == 2 and "not a directory" in result.output
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        result = runner.invoke(app, ["serve", "--port", str(busy.getsockname()[1])])
    assert result.exit_code == 2 and "cannot listen on 127.0.0.1" in result.output and len(result.output.strip().splitlines()) == 1


def test_a_self_consistent_server_that_answers_wrongly_is_flagged_by_local_references(tmp_path):
    server = qdebug_server(tmp_path, inject="offset-shift:10")
    try:
        capture = small_capture(tmp_path, 4)
        out = tmp_path / "r.json"
        result = run_qdebug("replay", str(capture), "--endpoint", server.url, "--concurrency", "2", "--model", "demo", "--device", "cpu", "--json", str(out))
    finally:
        server.stop()
    assert result.returncode == 1, result.stderr  # answers that differ from the model's own: replay exits 1
    doc = load_json(out)
    assert doc["local_references"] is True
    wrong = [r for r in doc["requests"] if r["reference"] != r["local_reference"]]
    assert wrong, "offset-shift:10 should change some answers"
    flagged = {f["request_id"] for f in doc["findings"] if f["kind"] == "server_mismatch"}
    assert flagged == {r["id"] for r in wrong}
    for r in doc["requests"]:
        assert r["burst_answers"] == [r["reference"]]  # self-consistent: the burst says what the isolated request said
        # alone, the server is not the model: server_mismatch (contaminated only where a burst answer is another's)
        assert r["verdict"] in (("server_mismatch", "contaminated") if r in wrong else ("ok",)), r
