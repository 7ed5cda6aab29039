"""A video capture replayed with `replay --endpoint --engine-traces` against vLLM with qdebug's plugin: the video reaches
the engine as a `video_url` part (the engine trace's prompt holds its `<|video_pad|>` run, as many prompt tokens as
transformers' processor makes of the same request, where a text part made 8), the engine trace holds the video's stages and
the verdict comes from comparing them with the local trace's, and the answers equal the model's own."""

from __future__ import annotations

import base64
import io
import json

import pytest

from qdebug.commands.engine_diff import FolderTraces
from qdebug.engine.trace_dir import read_index
from qdebug.trace.tensor_names import TensorKind as T
from tests.endpoint.conftest import run_qdebug

from .test_video import PROMPT, _frames  # the same four JPEG frames (two temporal patches) test_video.py serves
from .vllm_server import DEMO

pytestmark = pytest.mark.vllm


def _processor_prompt(frames: list[bytes]) -> list[int]:
    """transformers' own prompt ids for the video and the prompt (the demo's processor and chat template)."""
    from PIL import Image
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(str(DEMO))
    messages = [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": PROMPT}]}]
    text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    video = [Image.open(io.BytesIO(f)).convert("RGB") for f in frames]
    return processor(text=[text], videos=[video], return_tensors="pt")["input_ids"][0].tolist()


def test_a_captured_video_reaches_the_engine_as_a_video(traced_server, tmp_path):
    frames = _frames()
    url = "data:video/jpeg;base64," + ",".join(base64.b64encode(f).decode() for f in frames)
    capture = tmp_path / "video.jsonl"
    capture.write_text(json.dumps({"id": "vid-1", "max_tokens": 8, "messages": [{"role": "user", "content": [
        {"type": "video_url", "video_url": {"url": url}}, {"type": "text", "text": PROMPT}]}]}) + "\n")
    before = {line.get("qdebug_id") for line in read_index(traced_server.traces)}
    out = tmp_path / "r.json"
    result = run_qdebug("replay", str(capture), "--endpoint", traced_server.url, "--engine-traces", str(traced_server.traces),
                        "--model", "demo", "--device", "cpu", "--json", str(out))
    doc = json.loads(out.read_text())
    (request,) = doc["requests"]
    assert request["verdict"] == "ok", (doc["findings"], result.stderr)
    assert request["reference"].strip() == request["local_reference"]  # the engine answered the video the model sees
    assert doc["engine_caches"] == "fresh"  # vLLM lists itself owned_by "vllm": uuid and cache_salt were sent

    new = [line for line in read_index(traced_server.traces) if line.get("qdebug_id") not in before]
    phases = {line["qdebug_id"].rsplit(".", 1)[1]: line for line in new if ".vid-1." in line["qdebug_id"]}
    assert set(phases) == {"reference", "burst-1", "warm"}  # the warm phase (production caching) sends it as a video too
    expected = _processor_prompt(frames)
    for line in phases.values():
        engine = FolderTraces(traced_server.traces).load(line)
        assert engine.input_ids == expected and len(expected) > 8  # the whole prompt, not the text alone
        assert engine.tokens.count("<|video_pad|>") == 24  # 4 frames → 2 temporal patches of 6×8, merged 2×2
        (video,) = engine.stages["preprocess"].summary.videos  # the video's placeholder run, counted in the engine trace
        assert video.runs == [[3, 27]] and video.grid_thw == [2, 6, 8] and engine.tensor_or_none(T.ENCODE, item=0) is not None
    assert "answers only" not in json.dumps(doc["findings"])  # judged by stage comparison, not by the answers
    assert result.returncode == 0, result.stdout + result.stderr



def _mp4(path, frames: list[bytes], rate: int = 2) -> None:
    """The frames as an MP4 file (MPEG-4 part 2, written with PyAV) at `rate` fps."""
    import av
    import numpy as np
    from PIL import Image

    with av.open(str(path), "w") as out:
        stream = out.add_stream("mpeg4", rate=rate)
        stream.width, stream.height, stream.pix_fmt = 112, 84, "yuv420p"
        for f in frames:
            out.mux(stream.encode(av.VideoFrame.from_ndarray(np.asarray(Image.open(io.BytesIO(f)).convert("RGB")), format="rgb24")))
        out.mux(stream.encode())


def test_a_frames_folder_a_video_file_and_jpeg_data_get_the_same_verdicts_against_a_clean_server(traced_server, tmp_path):
    """The same video three ways in one capture (a folder of PNG frames, an MP4 file, vLLM's JPEG data): the engine is
    sent JPEG frames for each, and the local reference runs those same bytes, so a clean server is `ok` for all three
    (before: the folder's reference read the PNGs and the engine parted from it at encode: a false server_mismatch)."""
    from PIL import Image

    frames = _frames()
    folder = tmp_path / "frames"
    folder.mkdir()
    for i, f in enumerate(frames):  # PNGs: lossless, so the engine's JPEG of them is other pixels than the PNG's
        Image.open(io.BytesIO(f)).convert("RGB").save(folder / f"frame_{i:03d}.png")
    _mp4(tmp_path / "clip.mp4", frames)
    url = "data:video/jpeg;base64," + ",".join(base64.b64encode(f).decode() for f in frames)
    capture = tmp_path / "videos.jsonl"
    capture.write_text("".join(json.dumps({"id": rid, "max_tokens": 8, "messages": [{"role": "user", "content": [
        {"type": "video_url", "video_url": {"url": where}}, {"type": "text", "text": PROMPT}]}]}) + "\n"
        for rid, where in (("vid-folder", "frames"), ("vid-file", "clip.mp4"), ("vid-jpeg", url))))
    out = tmp_path / "r.json"
    result = run_qdebug("replay", str(capture), "--endpoint", traced_server.url, "--engine-traces", str(traced_server.traces),
                        "--model", "demo", "--device", "cpu", "--json", str(out), env={"COLUMNS": "200"})
    doc = json.loads(out.read_text())
    verdicts = {r["id"]: (r["verdict"], r["stage"]) for r in doc["requests"]}
    assert verdicts == {rid: ("ok", None) for rid in ("vid-folder", "vid-file", "vid-jpeg")}, (verdicts, doc["findings"])
    assert not [f for f in doc["findings"] if f["kind"] == "server_mismatch"], doc["findings"]
    for r in doc["requests"]:  # each engine answer is the model's own for the frames it was sent
        assert r["reference"].strip() == r["local_reference"].strip(), r
        assert r["visual_offset"] is not None and r["visual_offset"] == r["text_offset"], r  # a video's landing, said
    assert result.returncode == 0, result.stdout + result.stderr
