"""What `replay --endpoint` puts on the wire, seen by a recording server of our own on a loopback socket: every media
item travels as the kind of part it was captured as (image_url, video_url, input_audio), and `--engine-caches fresh`
gives each (run, phase, request, item) its own `uuid` and each (run, phase, request) its own `cache_salt` when the
server lists itself as vLLM (`owned_by`); `keep`, or a server that is not vLLM, gets neither."""

from __future__ import annotations

import base64
import io
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qdebug.cli import app

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
IMAGES = ("red_circle_top_left.png", "blue_circle_top_right.png")


class _Recorder(BaseHTTPRequestHandler):
    """Answers /v1/models and chat completions like an OpenAI-compatible server; keeps every body it was sent."""

    def do_GET(self) -> None:
        self._answer({"object": "list", "data": [{"id": "rec", "object": "model", "owned_by": self.server.owner}]})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            self.server.bodies.append((self.headers.get("X-Qdebug-Request"), body))
        self._answer({"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": "a circle"}}]})

    def _answer(self, doc: dict) -> None:
        data = json.dumps(doc).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:  # quiet
        pass


@pytest.fixture()
def recorder():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    server.bodies, server.lock, server.owner = [], threading.Lock(), "vllm"  # as vLLM lists its models
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


def _b64(path_or_bytes) -> str:
    data = path_or_bytes if isinstance(path_or_bytes, bytes) else Path(path_or_bytes).read_bytes()
    return base64.b64encode(data).decode()


def _video_url() -> str:
    from PIL import Image

    frames = []
    for name in (IMAGES[0], IMAGES[0], IMAGES[1], IMAGES[1]):
        buf = io.BytesIO()
        Image.open(SAMPLE / name).convert("RGB").resize((112, 84)).save(buf, format="JPEG", quality=95)
        frames.append(_b64(buf.getvalue()))
    return "data:video/jpeg;base64," + ",".join(frames)


def _wav() -> str:
    import numpy as np
    import soundfile as sf

    buf = io.BytesIO()
    sf.write(buf, (0.1 * np.sin(np.arange(8000) / 8000 * 2 * np.pi * 440)).astype("float32"), 16000, format="WAV")
    return _b64(buf.getvalue())


@pytest.fixture()
def capture(tmp_path) -> tuple[Path, str]:
    """Three requests: two images and text; a JPEG-frame video and text; an audio clip and text."""
    video = _video_url()
    image = [{"type": "image_url", "image_url": {"url": "data:image/png;base64," + _b64(SAMPLE / n)}} for n in IMAGES]
    lines = [
        {"id": "two-images", "max_tokens": 4, "messages": [{"role": "user", "content": [*image, {"type": "text", "text": "Compare."}]}]},
        {"id": "video", "max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "video_url", "video_url": {"url": video}}, {"type": "text", "text": "Describe."}]}]},
        {"id": "audio", "max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": _wav(), "format": "wav"}}, {"type": "text", "text": "Hear."}]}]},
    ]
    path = tmp_path / "capture.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path, video


def _replay(recorder, capture: Path, tmp_path: Path, *extra: str) -> dict:
    out = tmp_path / f"r{len(recorder.bodies)}.json"
    url = f"http://127.0.0.1:{recorder.server_address[1]}"
    result = CliRunner().invoke(app, ["replay", str(capture), "--endpoint", url, "--repeat", "2", "--concurrency", "3",
                                      "--json", str(out), "--exit-zero", *extra])
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert doc["engine_caches_said"] in " ".join(result.output.split())  # the report's header says what the JSON says
    return doc


def _media(body: dict) -> list[dict]:
    return [p for p in body["messages"][0]["content"] if p["type"] != "text"]


def test_fresh_gives_every_phase_request_and_item_its_own_identity(recorder, capture, tmp_path):
    path, video = capture
    doc = _replay(recorder, path, tmp_path)
    sent = {tag: body for tag, body in recorder.bodies}
    phases = ("reference", "burst-1", "burst-2")
    assert set(sent) == {f"{rid}/{phase}" for rid in ("two-images", "video", "audio") for phase in phases}
    for phase in phases:  # each item as the kind of part it was captured as, in order
        assert [p["type"] for p in sent[f"two-images/{phase}"]["messages"][0]["content"]] == ["image_url", "image_url", "text"]
        assert [p["type"] for p in sent[f"video/{phase}"]["messages"][0]["content"]] == ["video_url", "text"]
        assert sent[f"video/{phase}"]["messages"][0]["content"][0]["video_url"]["url"] == video  # the captured frames' bytes
        assert [p["type"] for p in sent[f"audio/{phase}"]["messages"][0]["content"]] == ["input_audio", "text"]
    uuids = [p["uuid"] for body in sent.values() for p in _media(body)]
    assert len(uuids) == 3 * (2 + 1 + 1) and len(set(uuids)) == len(uuids)  # one per (phase, request, item), none shared
    salts = [body["cache_salt"] for body in sent.values()]
    assert len(set(salts)) == len(salts) == 9
    assert all(len(s) <= 128 and not set(s) & set("@/\\\x00") for s in salts)  # what vLLM's validate_cache_salt takes
    assert all("uuid" not in p for body in sent.values() for p in body["messages"][0]["content"] if p["type"] == "text")
    assert doc["engine_caches"] == "fresh" and doc["engine_caches_said"] == "engine caches: fresh identities per run"
    assert {r["verdict"] for r in doc["requests"]} == {"ok"}

    first = set(uuids)
    recorder.bodies.clear()
    _replay(recorder, path, tmp_path)  # a second run shares no identity with the first
    assert not first & {p["uuid"] for _, body in recorder.bodies for p in _media(body)}


def _no_identity(recorder) -> None:
    assert len(recorder.bodies) == 9
    for _, body in recorder.bodies:
        assert "cache_salt" not in body
        assert all("uuid" not in p for p in body["messages"][0]["content"])


def test_keep_sends_no_identity_and_says_so(recorder, capture, tmp_path):
    path, _ = capture
    doc = _replay(recorder, path, tmp_path, "--engine-caches", "keep")
    _no_identity(recorder)
    assert doc["engine_caches"] == "keep" and doc["engine_caches_said"] == "engine caches: kept (production caching)"


def test_a_server_that_is_not_vllm_gets_no_identity(recorder, capture, tmp_path):
    recorder.owner = "huggingface"  # transformers serve answers 422 to a cache_salt: vLLM's fields go to vLLM only
    doc = _replay(recorder, capture[0], tmp_path)
    _no_identity(recorder)
    assert doc["engine_caches"] == "not_sent" and "does not list itself as vLLM" in doc["engine_caches_said"]
    assert {r["verdict"] for r in doc["requests"]} == {"ok"}


def test_a_bad_engine_caches_value_is_one_line_exit_2(capture, recorder):
    path, _ = capture
    url = f"http://127.0.0.1:{recorder.server_address[1]}"
    result = CliRunner().invoke(app, ["replay", str(path), "--endpoint", url, "--engine-caches", "sometimes"])
    assert result.exit_code == 2
    assert "--engine-caches sometimes: expected fresh or keep" in result.output and "Traceback" not in result.output
    assert recorder.bodies == []  # refused before anything was sent
    result = CliRunner().invoke(app, ["replay", str(path), "--engine-caches", "keep"])
    assert result.exit_code == 2 and "expected --endpoint URL with it" in result.output
