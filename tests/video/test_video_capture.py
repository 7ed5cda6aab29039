"""Captures with `video_url` parts: data: URLs (an MP4, or vLLM's comma-separated JPEG frames) and paths (a frame folder,
an MP4) under the image path rules, replayed, with and without `--inject temporal-ids-flat`."""

from __future__ import annotations

import base64
import io
import json

import pytest
from typer.testing import CliRunner

from qdebug.cli import app

from .conftest import COLOURS, frame, write_frames, write_mp4

runner = CliRunner()


def _part(url: str) -> dict:
    return {"type": "video_url", "video_url": {"url": url}}


def _line(rid: str, *parts) -> str:
    body = {"id": rid, "max_tokens": 2, "messages": [{"role": "user", "content": [*parts, {"type": "text", "text": "Describe the video."}]}]}
    return json.dumps(body)


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    """A capture of four video requests and two refused lines, beside its frame folder and MP4."""
    root = tmp_path_factory.mktemp("capture")
    write_frames(root / "frames")
    write_mp4(root / "clip.mp4", frames=4, rate=2)
    jpegs = []
    for c in COLOURS:
        buf = io.BytesIO()
        frame(c).save(buf, format="JPEG", quality=95)
        jpegs.append(base64.b64encode(buf.getvalue()).decode())
    mp4 = base64.b64encode((root / "clip.mp4").read_bytes()).decode()
    png = base64.b64encode((root / "frames" / "frame_000.png").read_bytes()).decode()
    lines = [
        _line("jpegs", _part("data:video/jpeg;base64," + ",".join(jpegs))),
        _line("mp4-data", _part("data:video/mp4;base64," + mp4)),
        _line("folder", _part("frames")),
        _line("file", _part("file://clip.mp4")),
        _line("escapes", _part("../elsewhere.mp4")),
        _line("mixed", _part("frames"), {"type": "image_url", "image_url": {"url": "data:image/png;base64," + png}}),
    ]
    path = root / "burst.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def _replay(capture, *extra) -> dict:
    result = runner.invoke(app, ["replay", str(capture), "--json", "-", "--device", "cpu", *extra])
    assert result.exit_code in (0, 1), result.output
    return {r["id"]: r for r in json.loads(result.stdout)["requests"]}, json.loads(result.stdout)["findings"]


def test_video_requests_replay_and_bad_lines_are_named(capture):
    requests, _ = _replay(capture)
    for rid in ("jpegs", "mp4-data", "folder", "file"):
        r = requests[rid]
        assert r["verdict"] == "ok" and r["error"] is None, r
        (image,) = r["images"]
        assert image["rows"] == 24 and image["visual_offset"] == image["text_offset"]  # 2 slices × 3×4 merged patches
    assert "escapes the capture's folder" in requests["escapes"]["error"]
    assert "video_url with image_url" in requests["mixed"]["error"]


def test_flat_temporal_ids_are_measured_in_a_replay(capture):
    requests, findings = _replay(capture, "--inject", "temporal-ids-flat")
    assert all(requests[rid]["verdict"] != "ok" for rid in ("jpegs", "folder"))
    messages = [f["message"] for f in findings]
    assert any("request folder: video 0: temporal ids == get_rope_index failed (received per slice [0, 0]" in m for m in messages)


def test_batched_mode_refuses_video_requests_by_name(capture):
    requests, _ = _replay(capture, "--mode", "batched")
    assert requests["folder"]["verdict"] == "error" and "expected --mode threads" in requests["folder"]["error"]
