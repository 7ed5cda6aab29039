"""Issue 21 item 22: `qdebug serve` refuses what it does not do (n, a bad top_logprobs, paths) with a 400 in the
client's terms, prints its real port for `--port 0`, and on Ctrl-C or SIGTERM exits 0 saying what it wrote."""

from __future__ import annotations

import base64
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.servers import Server, free_port

IMAGE = Path(__file__).resolve().parents[2] / "sample_data" / "red_circle_top_left.png"
DATA_URL = "data:image/png;base64," + base64.b64encode(IMAGE.read_bytes()).decode("ascii")


def _body(url: str = DATA_URL, **extra) -> dict:
    return {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                                       {"type": "text", "text": "Describe the image."}]}],
            "max_tokens": 2, **extra}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("serve")
    port = free_port()
    env = {"PYTHONPATH": str(IMAGE.parents[1])}
    srv = Server(["qdebug", "serve", "--port", str(port), "--device", "cpu"], port, tmp / "serve.log", env).wait_ready()
    yield srv
    srv.stop()


@pytest.mark.parametrize("extra, words", [
    ({"n": 3}, ["n: 3", "one choice per request"]),
    ({"logprobs": True, "top_logprobs": "abc"}, ['top_logprobs: "abc"', "0 to 20"]),
    ({"logprobs": True, "top_logprobs": 99}, ["top_logprobs: 99"]),
    ({"logprobs": "yes"}, ['logprobs: "yes"']),
])
def test_unsupported_fields_are_400(server, extra, words):
    response = httpx.post(f"{server.url}/v1/chat/completions", json=_body(**extra), timeout=120)
    assert response.status_code == 400, response.text
    message = response.json()["error"]["message"]
    assert all(w in message for w in words), message


@pytest.mark.parametrize("url", ["file:///etc/passwd", "img.png", "../x.png", "https://example.com/a.png"])
def test_non_data_image_urls_tell_the_client_only_what_it_can_do(server, url):
    response = httpx.post(f"{server.url}/v1/chat/completions", json=_body(url), timeout=120)
    assert response.status_code == 400, response.text
    message = response.json()["error"]["message"]
    assert "only data: URLs" in message
    assert "--allow-paths" not in message and "qdebug-serve-" not in message and "/tmp" not in message, message


def test_n_1_is_answered(server):
    response = httpx.post(f"{server.url}/v1/chat/completions", json=_body(n=1, logprobs=True, top_logprobs=2), timeout=120)
    assert response.status_code == 200, response.text
    assert len(response.json()["choices"]) == 1


def _start_on_port_zero(tmp: Path) -> tuple[subprocess.Popen, str]:
    log = open(tmp / "serve.log", "w+")
    env = {**os.environ, "PYTHONPATH": str(IMAGE.parents[1])}
    exe = os.path.join(os.path.dirname(sys.executable), "qdebug")
    proc = subprocess.Popen([exe, "serve", "--port", "0", "--device", "cpu", "--traces", str(tmp / "traces")], stdout=log, stderr=log, env=env)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        found = re.search(r"on (http://127\.0\.0\.1:(\d+))/v1", (tmp / "serve.log").read_text())
        if found:
            return proc, found.group(1)
        time.sleep(0.2)
    proc.kill()
    raise AssertionError((tmp / "serve.log").read_text())


@pytest.mark.parametrize("sig, word", [(signal.SIGTERM, "SIGTERM"), (signal.SIGINT, "Ctrl-C")])
def test_port_zero_prints_the_real_port_and_a_signal_says_what_was_written(tmp_path, sig, word):
    proc, url = _start_on_port_zero(tmp_path)
    try:
        assert not url.endswith(":0")
        for _ in range(2):
            response = httpx.post(f"{url}/v1/chat/completions", json=_body(), timeout=120)  # the printed port answers
            assert response.status_code == 200, response.text
        proc.send_signal(sig)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    log = (tmp_path / "serve.log").read_text()
    assert "no output was written" not in log and "Traceback" not in log, log
    assert f"stopped ({word}); wrote 2 trace(s) to {tmp_path / 'traces'}" in log, log
    assert sorted(p.name for p in (tmp_path / "traces").iterdir()) == ["000001.qdt", "000002.qdt", "index.jsonl"]
