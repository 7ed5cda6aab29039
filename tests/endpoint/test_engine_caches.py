"""What `replay --endpoint` puts on the wire, seen by a recording server of our own on a loopback socket: every media
item travels as the kind of part it was captured as (image_url, video_url, input_audio), and `--engine-caches fresh`
gives each (run, phase, request, item) of the cold phases its own `uuid` and each (run, phase, request) its own
`cache_salt` when the server lists itself as vLLM (`owned_by`), then sends a warm phase with neither (production
caching); `keep` sends neither in any phase, `cold` no warm phase, and a server that is not vLLM gets neither and no
warm phase. The report says which caches each phase met."""

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
        # a server whose caches change answers: what it says to a request it may serve from cache (no cache_salt)
        text = self.server.cached_answer if "cache_salt" not in body and self.server.cached_answer else "a circle"
        self._answer({"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]})

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
    server.cached_answer = ""
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


IDS = ("two-images", "video", "audio")
FRESH_SAID = "fresh identities and salt (no cache entry shared with another run)"
WARM_SAID = "production caching (no salt, no uuid: prefix, encoder and processor caches read as for any request)"


def test_fresh_gives_every_cold_phase_request_and_item_its_own_identity_then_a_warm_phase_none(recorder, capture, tmp_path):
    path, video = capture
    doc = _replay(recorder, path, tmp_path)
    sent = {tag: body for tag, body in recorder.bodies}
    phases = ("reference", "burst-1", "burst-2")
    assert set(sent) == {f"{rid}/{phase}" for rid in IDS for phase in (*phases, "warm")}
    warm = [(tag, body) for tag, body in recorder.bodies if tag.endswith("/warm")]
    assert [tag for tag, _ in recorder.bodies][-3:] == [tag for tag, _ in warm]  # after every cold phase
    for _, body in warm:  # the capture as production sends it: no salt, no uuid, every media part as captured
        assert "cache_salt" not in body and all("uuid" not in p for p in body["messages"][0]["content"])
    # every request named for the plugin's records as the replay names it (`<run>.<request>.<phase>`), never traced
    # without --engine-traces
    names = {tag: body["vllm_xargs"] for tag, body in recorder.bodies}
    run = {x["qdebug_id"].split(".")[0] for x in names.values()}
    assert len(run) == 1 and all(x == {"qdebug_id": f"{next(iter(run))}.{tag.replace('/', '.')}"} for tag, x in names.items())
    assert f"named {next(iter(run))}.<request>.<phase>" in doc["cache_provenance"]["said"]
    for phase in (*phases, "warm"):  # each item as the kind of part it was captured as, in order
        assert [p["type"] for p in sent[f"two-images/{phase}"]["messages"][0]["content"]] == ["image_url", "image_url", "text"]
        assert [p["type"] for p in sent[f"video/{phase}"]["messages"][0]["content"]] == ["video_url", "text"]
        assert sent[f"video/{phase}"]["messages"][0]["content"][0]["video_url"]["url"] == video  # the captured frames' bytes
        assert [p["type"] for p in sent[f"audio/{phase}"]["messages"][0]["content"]] == ["input_audio", "text"]
    cold = {tag: body for tag, body in sent.items() if not tag.endswith("/warm")}
    uuids = [p["uuid"] for body in cold.values() for p in _media(body)]
    assert len(uuids) == 3 * (2 + 1 + 1) and len(set(uuids)) == len(uuids)  # one per (phase, request, item), none shared
    salts = [body["cache_salt"] for body in cold.values()]
    assert len(set(salts)) == len(salts) == 9
    assert all(len(s) <= 128 and not set(s) & set("@/\\\x00") for s in salts)  # what vLLM's validate_cache_salt takes
    assert all("uuid" not in p for body in sent.values() for p in body["messages"][0]["content"] if p["type"] == "text")
    assert doc["engine_caches"] == "fresh"
    assert doc["engine_caches_said"] == f"engine caches: reference, burst-1, burst-2: {FRESH_SAID}; warm: {WARM_SAID}"
    assert doc["phases"] == [{"phase": p, "caching": "fresh", "said": FRESH_SAID} for p in phases] + \
        [{"phase": "warm", "caching": "production", "said": WARM_SAID}]
    assert {r["verdict"] for r in doc["requests"]} == {"ok"}
    assert {(r["warm_answer"], r["warm_verdict"], r["warm_parted"]) for r in doc["requests"]} == {("a circle", "ok", False)}
    assert doc["counts"]["warm"] == {"answers": 3, "parted": 0, "cache_contaminated": 0, "errors": 0}
    # without --engine-traces nothing says who computed what a cache served: said, and no cache verdict given
    assert not doc["cache_provenance"]["read"] and "pass --engine-traces DIR" in doc["cache_provenance"]["said"]

    first = set(uuids)
    recorder.bodies.clear()
    _replay(recorder, path, tmp_path)  # a second run shares no identity with the first
    assert not first & {p["uuid"] for _, body in recorder.bodies for p in _media(body) if "uuid" in p}


def _no_identity(recorder, named: bool = True) -> None:
    assert len(recorder.bodies) == 9 and not [tag for tag, _ in recorder.bodies if tag.endswith("/warm")]
    for _, body in recorder.bodies:
        assert "cache_salt" not in body
        assert all("uuid" not in p for p in body["messages"][0]["content"])
        assert ("vllm_xargs" in body) == named  # vLLM's field, for vLLM only


def test_keep_sends_no_identity_in_any_phase_and_says_so(recorder, capture, tmp_path):
    path, _ = capture
    doc = _replay(recorder, path, tmp_path, "--engine-caches", "keep")
    _no_identity(recorder)
    assert doc["engine_caches"] == "keep"
    assert doc["engine_caches_said"] == f"engine caches: reference, burst-1, burst-2: {WARM_SAID}"
    assert {p["caching"] for p in doc["phases"]} == {"production"} and "warm" not in doc["counts"]


def test_cold_sends_the_cold_phases_only(recorder, capture, tmp_path):
    path, _ = capture
    doc = _replay(recorder, path, tmp_path, "--engine-caches", "cold")
    assert len(recorder.bodies) == 9 and all("cache_salt" in body for _, body in recorder.bodies)
    assert doc["engine_caches"] == "cold" and doc["engine_caches_said"] == f"engine caches: reference, burst-1, burst-2: {FRESH_SAID}"
    assert all(r["warm_verdict"] is None for r in doc["requests"])


def test_a_server_that_is_not_vllm_gets_no_identity_and_no_warm_phase(recorder, capture, tmp_path):
    recorder.owner = "huggingface"  # transformers serve answers 422 to a cache_salt: vLLM's fields go to vLLM only
    doc = _replay(recorder, capture[0], tmp_path)
    _no_identity(recorder, named=False)
    assert doc["engine_caches"] == "not_sent" and "not controlled: the server is not vLLM" in doc["engine_caches_said"]
    assert {p["caching"] for p in doc["phases"]} == {"uncontrolled"}
    assert not doc["cache_provenance"]["read"] and "the server is not vLLM" in doc["cache_provenance"]["said"]
    assert {r["verdict"] for r in doc["requests"]} == {"ok"}


def test_a_warm_run_that_parts_from_its_cold_run_is_judged_by_its_answers_and_no_cache_is_blamed(recorder, capture, tmp_path):
    recorder.cached_answer = "a square"  # what this server answers a request it may serve from its caches
    out = tmp_path / "r.json"
    url = f"http://127.0.0.1:{recorder.server_address[1]}"
    result = CliRunner().invoke(app, ["replay", str(capture[0]), "--endpoint", url, "--concurrency", "3", "--json", str(out)],
                                env={"COLUMNS": "300"})
    doc = json.loads(out.read_text())
    assert result.exit_code == 1, result.output  # a request not ok
    for r in doc["requests"]:
        assert (r["reference"], r["warm_answer"], r["warm_parted"]) == ("a circle", "a square", True), r
        assert r["verdict"] == r["warm_verdict"] == "diverged" and r["burst_verdicts"] == ["ok"], r
        (f,) = [f for f in doc["findings"] if f["kind"] == "warm_run" and f["request_id"] == r["id"]]
        assert "parts from its cold run" in f["message"] and "no cache is blamed without it" in f["message"], f
        assert "pass --engine-traces DIR" in f["message"]
    assert "cache_contaminated" not in result.output and doc["counts"]["warm"]["parted"] == 3
    assert doc["counts"]["requests"] == {"diverged": 3}


def test_a_bad_engine_caches_value_is_one_line_exit_2(capture, recorder):
    path, _ = capture
    url = f"http://127.0.0.1:{recorder.server_address[1]}"
    result = CliRunner().invoke(app, ["replay", str(path), "--endpoint", url, "--engine-caches", "sometimes"])
    assert result.exit_code == 2
    assert "--engine-caches sometimes: expected fresh, keep or cold" in result.output and "Traceback" not in result.output
    assert recorder.bodies == []  # refused before anything was sent
    result = CliRunner().invoke(app, ["replay", str(path), "--engine-caches", "keep"])
    assert result.exit_code == 2 and "expected --endpoint URL with it" in result.output


def test_replay_help_says_which_verdicts_exit_1_and_what_engine_caches_does():
    result = CliRunner().invoke(app, ["replay", "--help"], env={"COLUMNS": "200"})
    said = " ".join(result.output.replace("│", " ").split())
    assert result.exit_code == 0
    for verdict in ("contaminated", "desync", "diverged", "server_mismatch", "batch_dependent", "cache_contaminated"):
        assert verdict in said.split("Exits 1 when", 1)[1].split("(unless --exit-zero)")[0], verdict
    assert "then a warm phase replays the capture with production caching" in said and "cold: the cold phases only" in said
