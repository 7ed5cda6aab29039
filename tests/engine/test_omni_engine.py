"""Qwen2.5-Omni's clips and videos inside vLLM, compared stage by stage with qdebug's transformers trace of the same
full checkpoint and request (its image request: test_families). `diff CLIP|VIDEO PROMPT --engine` agrees at every
stage, the encoder's rows included (one tensor per item: the engine's clip or video against the local trace's item
under `media`), and the engine's trace checks the positions the decoder received against the model's own MRoPE ids;
a request mixing an image, a clip and a video is held item by item on both sides and parts nowhere."""

from __future__ import annotations

import json

import pytest

from qdebug.commands.engine_diff import FolderTraces
from qdebug.engine.trace_dir import read_index
from qdebug.vocab import StageVerdict
from tests.endpoint.conftest import run_qdebug
from tests.families.build import tone, video_with_sound

from .families import build
from .vllm_server import VllmServer

pytestmark = pytest.mark.vllm
OMNI = "qwen2_5_omni"


@pytest.fixture(scope="module")
def omni(vllm_py, tmp_path_factory):
    """A traced vLLM serving the engine-sized full Omni checkpoint (float32), and that checkpoint."""
    where = tmp_path_factory.mktemp("engine-omni")
    checkpoint = build(OMNI, where / "checkpoint")
    with VllmServer(vllm_py, where, model=checkpoint, trace_dir=where / "traces") as server:
        server.traces = where / "traces"
        yield server, checkpoint


def _diff(omni, media: str, prompt: str, out, *extra: str):
    """`qdebug diff MEDIA PROMPT --engine` against the Omni server; (its JSON, the engine trace it read)."""
    server, checkpoint = omni
    before = {line.get("qdebug_id") for line in read_index(server.traces)}
    result = run_qdebug("diff", media, prompt, "--engine", server.url, "--engine-traces", str(server.traces), "--model", str(checkpoint),
                        "--max-new-tokens", "6", "--json", str(out), *extra, env={"COLUMNS": "200"})
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stdout + result.stderr
    (line,) = [line for line in read_index(server.traces) if line.get("qdebug_id") not in before]
    return json.loads(out.read_text()), FolderTraces(server.traces).load(line)


def _agrees(doc: dict) -> dict:
    verdicts = {s["name"]: s["verdict"] for s in doc["stages"]}
    assert set(verdicts.values()) == {"ok"} and doc["first_divergence"] is None and doc["texts_agree"], verdicts
    encode = next(s for s in doc["stages"] if s["name"] == "encode")
    assert encode["detail"] != "no images" and encode["cosine"] > 0.9999  # the item's encoder rows were compared, not skipped
    return encode


def test_a_clip_agrees_at_every_stage_and_reads_its_frames(omni, tmp_path):
    doc, engine = _diff(omni, str(tone(tmp_path / "tone.wav", rate=16000)), "What is this sound?", tmp_path / "d.json")
    _agrees(doc)
    (clip,) = engine.meta.audio  # vLLM hands Omni's kept frames (input_audio_features): 1 s at hop 160
    assert (clip["frames"], clip["rows"], clip["seconds"]) == (100, 25, 1.0)
    sync = {c.name: c.ok for c in engine.stages["sync"].checks}
    assert sync["MRoPE position ids == the model's get_mrope_input_positions"] and all(sync.values()), sync


def test_a_video_agrees_at_every_stage(omni, tmp_path):
    video = video_with_sound(tmp_path / "v.mp4", seconds=2)
    doc, engine = _diff(omni, str(video), "What happens?", tmp_path / "d.json", "--fps", "2")
    encode = _agrees(doc)
    assert encode["token_kind"] == "video"  # the video's rows, named as what they are
    assert [i.grid_thw for i in engine.images] == [(2, 24, 24)]
    assert all(c.ok for name in ("preprocess", "encode", "sync") for c in engine.stages[name].checks)


def test_an_image_a_clip_and_a_video_in_one_request_agree_item_by_item(omni, tmp_path):
    """A request mixing all three: the engine's trace holds each item at its own encoder, as the local one does, and the
    two part nowhere (parting, what replay and batch comparisons judge by), every item's rows bit for bit in place."""
    from pathlib import Path

    import httpx

    from qdebug.analysis.diff import diff_traces
    from qdebug.analysis.engine_compare import parting
    from qdebug.commands.engine_diff import as_sent, await_trace
    from qdebug.commands.media_input import model_media, read_media, sort_media
    from qdebug.replay.endpoint import chat_body

    from .client import SAMPLE
    from .families import local_trace

    server, checkpoint = omni
    media = sort_media([SAMPLE / "red_circle_top_left.png"], [tone(tmp_path / "tone.wav", rate=16000)], [video_with_sound(tmp_path / "v.mp4", seconds=2)])
    request = as_sent(read_media(model_media(str(checkpoint)), media, fps=2).request("Describe <image>, <audio> and <video>.", 6))
    body = {**chat_body(request, "demo", top_logprobs=0), "vllm_xargs": {"qdebug_trace": True, "qdebug_id": "omni-mixed"}}
    assert httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=300).status_code == 200
    engine, local = await_trace(Path(server.traces), "omni-mixed", 60), local_trace(checkpoint, "float32", request)
    held = lambda t: [(m.modality, m.item, m.runs, m.expected, m.exact) for m in t.stages["sync"].summary.media]
    assert held(engine) == held(local) and [h[0] for h in held(engine)] == ["image", "audio", "video"]
    assert all(h[4] for h in held(engine))
    assert all(c.ok for name in ("preprocess", "encode", "sync") for c in engine.stages[name].checks)
    found = parting(local, engine)
    assert found.stage is None and found.said == "", found.said
    result = diff_traces(local, engine)
    assert {s.verdict for s in result.stages} == {StageVerdict.OK} and engine.generated_ids == local.generated_ids
    assert next(s for s in result.stages if s.name == "encode").detail != "no images"
