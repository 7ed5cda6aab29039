"""Video inside the engine, compared stage by stage with qdebug's local trace of the same request: `diff FRAMES PROMPT
--engine` on the demo (its chat template has a video branch) agrees at every stage on a clean vLLM; with the temporal ids
of the video's rows flattened inside vLLM (`QDEBUG_VLLM_INJECT=temporal-ids-flat`) both `diff --engine` and an endpoint
replay of the same video part at `sync`, from the position ids the two traces hold."""

from __future__ import annotations

import base64
import json

import pytest

from qdebug.commands.engine_diff import FolderTraces
from qdebug.engine.trace_dir import read_index
from tests.endpoint.conftest import run_qdebug

from .test_engine_faults import faulty_server
from .test_video import PROMPT, _frames  # four JPEG frames of one size: two temporal patches of 6×8

pytestmark = pytest.mark.vllm
INPUT_STAGES = ("preprocess", "encode", "sync")


@pytest.fixture(scope="module")
def frames_dir(tmp_path_factory):
    """A frame folder (sorted by name) of the four frames."""
    folder = tmp_path_factory.mktemp("frames")
    for i, frame in enumerate(_frames()):
        (folder / f"f{i:02d}.jpg").write_bytes(frame)
    return folder


@pytest.fixture(scope="module")
def flat_server(vllm_py, tmp_path_factory):
    """A traced vLLM whose runner flattens every video token's temporal MRoPE id (the plugin's temporal-ids-flat)."""
    with faulty_server(vllm_py, tmp_path_factory.mktemp("vllm-flat"), "temporal-ids-flat") as server:
        yield server


def _diff(server, frames_dir, out) -> tuple[dict, object]:
    result = run_qdebug("diff", str(frames_dir), PROMPT, "--engine", server.url, "--engine-traces", str(server.traces),
                        "--json", str(out), env={"COLUMNS": "200"})
    assert "Traceback" not in result.stderr, result.stderr
    return json.loads(out.read_text()), result


def _engine_trace(server, since: set):
    """The engine trace of the one diff request sent since `since` (the index's qdebug_ids before it)."""
    (line,) = [line for line in read_index(server.traces) if line.get("qdebug_id") not in since]
    return FolderTraces(server.traces).load(line)


def test_diff_frames_engine_agrees_at_every_stage(traced_server, frames_dir, tmp_path):
    before = {line.get("qdebug_id") for line in read_index(traced_server.traces)}
    doc, result = _diff(traced_server, frames_dir, tmp_path / "d.json")
    assert result.returncode == 0, result.stdout + result.stderr
    verdicts = {s["name"]: s["verdict"] for s in doc["stages"]}
    assert set(verdicts.values()) == {"ok"} and doc["first_divergence"] is None, verdicts
    encode = next(s for s in doc["stages"] if s["name"] == "encode")
    assert encode["detail"] != "no images" and encode["token_kind"] == "video"  # the video's rows were compared, not skipped, and named so
    assert {"layer.3", "logits", "step.0"} <= set(verdicts)

    engine = _engine_trace(traced_server, before)
    (video,) = engine.stages["preprocess"].summary.videos
    assert video.grid_thw == [2, 6, 8] and video.runs == [[3, 27]] and video.pixel_values_videos_shape == [96, 1176]
    assert engine.images[0].grid_thw == (2, 6, 8) and engine.request.videos == [engine.images[0].path]
    (synced,) = engine.stages["sync"].summary.videos
    assert synced.rows == synced.placeholders == 24 and synced.match == 1.0
    assert synced.temporal_ids == synced.expected_temporal_ids and len(set(synced.temporal_ids)) == 2  # one id per slice
    assert all(c.ok for name in INPUT_STAGES for c in engine.stages[name].checks)


def test_a_temporal_id_fault_in_the_engine_parts_at_sync(flat_server, frames_dir, tmp_path):
    before = {line.get("qdebug_id") for line in read_index(flat_server.traces)}
    doc, result = _diff(flat_server, frames_dir, tmp_path / "d.json")
    assert result.returncode == 1, result.stdout + result.stderr
    assert doc["first_divergence"]["stage"] == "sync", doc["first_divergence"]
    verdicts = {s["name"]: s["verdict"] for s in doc["stages"]}
    assert verdicts["preprocess"] == verdicts["encode"] == "ok"  # the rows are the same; where they sit in time is not
    positions = [f for f in doc["findings"] if f["kind"] == "position_ids"]
    assert positions and "differ at 12 positions" in positions[0]["message"]  # the second slice's 12 rows

    engine = _engine_trace(flat_server, before)  # the engine's own trace says it too: ids received vs the model's function
    (synced,) = engine.stages["sync"].summary.videos
    assert synced.temporal_ids == [synced.expected_temporal_ids[0]] * 2 and len(set(synced.expected_temporal_ids)) == 2
    failed = [c.name for c in engine.stages["sync"].checks if not c.ok]
    assert any("temporal ids" in name for name in failed) and any("get_mrope_input_positions" in name for name in failed)


def test_a_video_capture_replayed_against_the_fault_is_a_mismatch_at_sync(flat_server, tmp_path):
    url = "data:video/jpeg;base64," + ",".join(base64.b64encode(f).decode() for f in _frames())
    capture = tmp_path / "video.jsonl"
    capture.write_text(json.dumps({"id": "vid-1", "max_tokens": 8, "messages": [{"role": "user", "content": [
        {"type": "video_url", "video_url": {"url": url}}, {"type": "text", "text": PROMPT}]}]}) + "\n")
    out = tmp_path / "r.json"
    result = run_qdebug("replay", str(capture), "--endpoint", flat_server.url, "--engine-traces", str(flat_server.traces),
                        "--model", "demo", "--device", "cpu", "--json", str(out))
    doc = json.loads(out.read_text())
    (request,) = doc["requests"]
    assert request["verdict"] == "server_mismatch" and request["stage"] == "sync", (request, doc["findings"])
    assert request["reference"].strip() == request["local_reference"]  # the same answer: only the stages tell
    mismatch = [f for f in doc["findings"] if f["kind"] == "server_mismatch"]
    assert mismatch and "position ids" in mismatch[0]["message"] and "answers only" not in json.dumps(doc["findings"])
    assert result.returncode == 1, result.stdout + result.stderr
