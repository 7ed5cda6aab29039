"""`replay --endpoint` of a capture with image, video and audio parts against a real `qdebug serve` of the demo (images
and video, no audio): the video is served as a video (its trace's prompt holds the video's placeholder run), the
audio request is an error naming its `input_audio` item, and the fresh cache identities (`uuid`, `cache_salt`) are
accepted and ignored."""

from __future__ import annotations

import json

import httpx
import pytest

from .conftest import SAMPLE, load_json, qdebug_server, run_qdebug
from .test_engine_caches import _b64, _video_url, _wav


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("media")
    server = qdebug_server(tmp)
    yield server, tmp
    server.stop()


def _capture(tmp_path):
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + _b64(SAMPLE / "red_circle_top_left.png")}}
    lines = [
        {"id": "image", "max_tokens": 4, "messages": [{"role": "user", "content": [image, {"type": "text", "text": "Describe the image."}]}]},
        {"id": "video", "max_tokens": 4, "messages": [{"role": "user", "content": [
            {"type": "video_url", "video_url": {"url": _video_url()}}, {"type": "text", "text": "Describe the image."}]}]},
        {"id": "audio", "max_tokens": 4, "messages": [{"role": "user", "content": [
            {"type": "input_audio", "input_audio": {"data": _wav(), "format": "wav"}}, {"type": "text", "text": "Hear."}]}]},
    ]
    path = tmp_path / "media.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_each_item_reaches_qdebug_serve_as_its_kind_or_the_request_names_it(served, tmp_path):
    server, tmp = served
    out = tmp_path / "r.json"
    result = run_qdebug("replay", str(_capture(tmp_path)), "--endpoint", server.url, "--json", str(out))
    assert result.returncode == 1, result.stderr  # the audio request is an error
    doc = load_json(out)
    verdicts = {r["id"]: r["verdict"] for r in doc["requests"]}
    assert verdicts == {"image": "ok", "video": "ok", "audio": "error"}, doc["findings"]
    (audio,) = [r for r in doc["requests"] if r["id"] == "audio"]
    assert "HTTP 400" in audio["error"] and "(input_audio): the served model takes no audio" in audio["error"]
    assert "Traceback" not in result.stderr

    from qdebug.trace.schema import load_trace

    index = {line["client_request"]: line for line in map(json.loads, (tmp / "traces" / "index.jsonl").read_text().splitlines())}
    for phase in ("reference", "burst-1"):
        trace = load_trace(tmp / "traces" / index[f"video/{phase}"]["trace"])
        assert trace.tokens.count("<|video_pad|>") == 24 and len(trace.input_ids) > 24  # the video's run, not a text part


def test_cache_identities_are_accepted_and_ignored(served):
    server, _ = served
    part = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + _b64(SAMPLE / "red_circle_top_left.png")}}
    body = {"model": "qdebug-demo", "max_tokens": 4, "temperature": 0,
            "messages": [{"role": "user", "content": [part, {"type": "text", "text": "Describe the image."}]}]}
    plain = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=120)
    salted = {**body, "cache_salt": "qdebug-run-reference-0", "messages": [{"role": "user", "content": [
        {**part, "uuid": "qdebug-run-reference-0-0"}, {"type": "text", "text": "Describe the image."}]}]}
    answer = httpx.post(f"{server.url}/v1/chat/completions", json=salted, timeout=120)
    assert plain.status_code == answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == plain.json()["choices"][0]["message"]["content"]
