"""Item 3: a small PNG declaring 20000×10000 pixels is a one-line error, and one request's error inside a capture."""

from __future__ import annotations

import base64
import json

import pytest
from PIL import Image

from qdebug.errors import ImageError
from qdebug.replay.formats.capture import parse_capture
from qdebug.trace.request import load_image

from .conftest import one_line_error, qdebug


@pytest.fixture(scope="module")
def bomb(tmp_path_factory):
    """A 1-bit 20000×10000 PNG: about 24 KB on disk, 200 million pixels declared."""
    path = tmp_path_factory.mktemp("bomb") / "bomb.png"
    Image.new("1", (20000, 10000)).save(path, optimize=True)
    assert path.stat().st_size < 100_000
    return path


def test_attn_refuses_a_bomb_in_one_line(bomb):
    proc = qdebug("attn", bomb, "Describe.", "--device", "cpu")
    one_line_error(proc, "image too large", "200,000,000 pixels", "bomb.png")
    assert proc.returncode == 2


def test_bomb_under_twice_the_limit_is_refused_too(tmp_path):
    # Pillow only warns between MAX_IMAGE_PIXELS and twice that, then decodes ~100 M pixels; qdebug refuses.
    path = tmp_path / "big.png"
    Image.new("1", (10000, 10000)).save(path, optimize=True)
    with pytest.raises(ImageError, match="100,000,000 pixels"):
        load_image(path)


def test_capture_bomb_is_one_error_request_and_the_rest_replay(tmp_path, bomb, red_png):
    (tmp_path / "bomb.png").write_bytes(bomb.read_bytes())
    (tmp_path / "ok.png").write_bytes(red_png.read_bytes())
    data_url = "data:image/png;base64," + base64.b64encode(bomb.read_bytes()).decode()

    def line(rid, url):
        return json.dumps({"id": rid, "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": "Describe the image."}]}], "max_tokens": 3})

    capture = tmp_path / "c.jsonl"
    capture.write_text("\n".join([line("path-bomb", "bomb.png"), line("data-bomb", data_url), line("fine", "ok.png")]) + "\n")
    batch = parse_capture(capture)
    errors = {r.request_id: r.error for r in batch.requests}
    assert "image too large" in errors["path-bomb"] and "image too large" in errors["data-bomb"]
    assert errors["fine"] is None
    proc = qdebug("replay", capture, "--device", "cpu", "--json", tmp_path / "r.json")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr  # exit 1: some requests are errors
    verdicts = {r["id"]: (r["verdict"], r["error"]) for r in json.loads((tmp_path / "r.json").read_text())["requests"]}
    assert verdicts["fine"][0] == "ok"
    assert verdicts["path-bomb"][0] == verdicts["data-bomb"][0] == "error"
    assert "200,000,000 pixels" in verdicts["path-bomb"][1]


@pytest.mark.parametrize("cut", [40, 100, 400])
def test_truncated_image_files_are_one_line(tmp_path, red_png, cut):
    path = tmp_path / "cut.png"
    path.write_bytes(red_png.read_bytes()[:cut])
    with pytest.raises(ImageError) as info:
        load_image(path)
    assert "\n" not in info.value.message and "cut.png" in info.value.message
