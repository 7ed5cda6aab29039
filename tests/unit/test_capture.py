"""JSONL captures: good requests, one broken line of each kind, path rules, format detection."""

from __future__ import annotations

import base64
import io
import json

import pytest
from PIL import Image

from qdebug.errors import ReplayFormatError
from qdebug.replay.formats.capture import parse_capture
from qdebug.replay.formats.detect import read_batch


def png_bytes(size: tuple[int, int], colour: tuple[int, int, int]) -> bytes:
    """A solid PNG of a given size."""
    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, format="PNG")
    return buf.getvalue()


def data_url(raw: bytes, mime: str = "image/png") -> str:
    """bytes as a base64 data: URL."""
    return f"data:{mime};base64," + base64.b64encode(raw).decode()


def body(*content, **extra) -> str:
    """One capture line: a chat-completions request with a user message of the given parts."""
    obj = {"model": "Qwen/Qwen2-VL-2B-Instruct", "messages": [{"role": "user", "content": list(content)}]}
    obj.update(extra)
    return json.dumps(obj)


def image_part(url, as_dict: bool = True) -> dict:
    """An image_url content part (dict or bare-string form)."""
    return {"type": "image_url", "image_url": {"url": url} if as_dict else url}


def text_part(text: str) -> dict:
    """A text content part."""
    return {"type": "text", "text": text}


@pytest.fixture
def capture(tmp_path):
    """A capture folder: images inside and one outside, and a capture mixing good and broken lines."""
    folder = tmp_path / "cap"
    (folder / "imgs").mkdir(parents=True)
    (folder / "imgs" / "b.png").write_bytes(png_bytes((40, 30), (0, 255, 0)))
    (folder / "corrupt.png").write_bytes(b"\x89PNG\r\n\x1a\n not really")
    (tmp_path / "x.png").write_bytes(png_bytes((8, 8), (0, 0, 255)))
    red = png_bytes((32, 24), (255, 0, 0))
    system = {"role": "system", "content": "You are terse."}
    lines = [
        # 1: data URL, explicit fields, a system turn that must be ignored
        json.dumps({
            "model": "Qwen/Qwen2-VL-2B-Instruct", "id": "r1", "arrival_ts": 12.5, "observed": "a red square",
            "max_tokens": 7,
            "messages": [system, {"role": "user", "content": [image_part(data_url(red)), text_part("What is it?")]}],
        }),
        # 2: relative path, text before the image, bare-string image_url, no id
        body(text_part("Look: "), image_part("imgs/b.png", as_dict=False), max_completion_tokens=3),
        "",  # 3: blank, skipped
        "{not json",  # 4
        body(image_part("imgs/missing.png"), id="r5"),  # 5
        body(image_part("data:image/png;base64,@@@notbase64@@@"), id="r6"),  # 6
        body(image_part("../x.png"), id="r7"),  # 7
        body(image_part("https://example.com/cat.png"), id="r8"),  # 8
        body(image_part("file://imgs/b.png"), text_part("again"), id="r1"),  # 9: duplicate id
        json.dumps({"id": "r10", "messages": [{"role": "user", "content": "just text"}]}),  # 10: string content
        body(image_part("corrupt.png"), id="r11"),  # 11
        json.dumps([1, 2]),  # 12
        json.dumps({"id": "r13", "messages": []}),  # 13
        json.dumps({"id": "r14", "messages": [{"role": "user", "content": [text_part("")]}]}),  # 14
    ]
    path = folder / "capture.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_capture_good_lines(capture):
    batch = parse_capture(capture)
    assert batch.kind == "capture" and batch.source == str(capture)
    assert batch.total_lines == 14
    by_id = {r.request_id: r for r in batch.requests}
    r1 = by_id["r1"]
    assert r1.error is None and r1.line == 1
    assert (r1.model_name, r1.arrival_ts, r1.observed, r1.image_label) == (
        "Qwen/Qwen2-VL-2B-Instruct", 12.5, "a red square", "data#1"
    )
    req = r1.request
    assert req.request_id == "r1" and req.max_new_tokens == 7
    assert req.parts == [("image", 0), ("text", "What is it?")]
    assert req.images[0].size == (32, 24) and req.images[0].mode == "RGB"
    assert req.images[0].getpixel((0, 0)) == (255, 0, 0)
    assert req.image_paths[0].startswith("data:image/png (") and req.image_paths[0].endswith(" bytes)")

    r2 = by_id["2"]
    assert r2.error is None and r2.arrival_ts is None and r2.observed is None
    assert r2.request.parts == [("text", "Look: "), ("image", 0)]
    assert r2.request.images[0].size == (40, 30)
    assert r2.request.image_paths == ["imgs/b.png"] and r2.image_label == "b.png"
    assert r2.request.max_new_tokens == 3

    dup = by_id["r1#9"]
    assert dup.error is None and dup.request.request_id == "r1#9"
    assert dup.request.parts == [("image", 0), ("text", "again")]

    r10 = by_id["r10"]
    assert r10.error is None and r10.request.parts == [("text", "just text")] and r10.image_label is None
    assert r10.request.max_new_tokens == 16


def test_capture_broken_lines_are_errors_and_parsing_continues(capture):
    batch = parse_capture(capture)
    errors = {r.request_id: r.error for r in batch.requests if r.error}
    assert [r.request_id for r in batch.requests] == [
        "r1", "2", "4", "r5", "r6", "r7", "r8", "r1#9", "r10", "r11", "12", "r13", "r14"
    ]
    assert set(errors) == {"4", "r5", "r6", "r7", "r8", "r11", "12", "r13", "r14"}
    assert "bad JSON" in errors["4"]
    assert "not found" in errors["r5"] and "missing.png" in errors["r5"]
    assert "base64" in errors["r6"]
    assert "escapes" in errors["r7"] and "--allow-paths" in errors["r7"]
    assert "remote image URLs are not fetched" in errors["r8"]
    assert "corrupt" in errors["r11"] or "not an image" in errors["r11"]
    assert "not a JSON object" in errors["12"]
    assert "no messages" in errors["r13"]
    assert "no image and no text" in errors["r14"]
    assert all("\n" not in e for e in errors.values())
    assert all(r.request is None for r in batch.requests if r.error)
    assert {r.request_id: r.line for r in batch.requests}["r7"] == 7


def test_allow_paths_reads_outside_the_folder(capture):
    batch = parse_capture(capture, allow_paths=True)
    r7 = {r.request_id: r for r in batch.requests}["r7"]
    assert r7.error is None and r7.request.images[0].size == (8, 8)
    assert r7.request.image_paths == ["../x.png"]


def test_symlink_out_of_the_folder_is_an_escape(tmp_path):
    folder = tmp_path / "cap"
    folder.mkdir()
    (tmp_path / "outside.png").write_bytes(png_bytes((4, 4), (1, 2, 3)))
    (folder / "inside.png").symlink_to(tmp_path / "outside.png")
    path = folder / "c.jsonl"
    path.write_text(body(image_part("inside.png"), id="s") + "\n" + body(image_part(f"file://{tmp_path / 'outside.png'}"), id="abs") + "\n")
    errors = {r.request_id: r.error for r in parse_capture(path).requests}
    assert "escapes" in errors["s"] and "escapes" in errors["abs"]
    assert all(r.error is None for r in parse_capture(path, allow_paths=True).requests)


def test_missing_capture_is_a_format_error(tmp_path):
    with pytest.raises(ReplayFormatError, match="capture not found"):
        parse_capture(tmp_path / "nope.jsonl")
    with pytest.raises(ReplayFormatError, match="directory"):
        parse_capture(tmp_path)


def test_read_batch_detects_both_formats(capture, tmp_path):
    assert read_batch(capture).kind == "capture"
    log = tmp_path / "run.log"
    log.write_text("\n\n2024-07-12T14:23:07Z [DEBUG] VisualEncoder::encode_image: request_id=1 start\n")
    batch = read_batch(log)
    assert batch.kind == "runtime-log" and [e.request_id for e in batch.events] == ["1"]
    # A capture whose first line is broken is still a capture (a later line is a JSON object).
    broken_first = tmp_path / "b.jsonl"
    broken_first.write_text("{oops\n" + body(text_part("hi"), id="ok") + "\n")
    assert read_batch(broken_first).kind == "capture"
    # An explicit format wins over detection.
    assert read_batch(capture, format="runtime-log").kind == "runtime-log"


def test_read_batch_rejects_bad_format_and_empty_files(tmp_path, capture):
    with pytest.raises(ReplayFormatError, match="capture, runtime-log"):
        read_batch(capture, format="har")
    empty = tmp_path / "empty.log"
    empty.write_text("")
    with pytest.raises(ReplayFormatError, match="empty file"):
        read_batch(empty)
    blank = tmp_path / "blank.log"
    blank.write_text("\n  \n\t\n")
    with pytest.raises(ReplayFormatError, match="empty file"):
        read_batch(blank)
    with pytest.raises(ReplayFormatError, match="not found"):
        read_batch(tmp_path / "nope")


def test_a_content_part_whose_type_is_a_list_or_object_is_that_line_s_error(tmp_path):
    """A part's "type" that is JSON but not a string is no media kind (it was used as a dict key: TypeError, and the
    rest of the file went unread); the line is an error naming it, and the next line still parses."""
    (tmp_path / "a.png").write_bytes(png_bytes((4, 4), (9, 9, 9)))
    lines = [body({"type": ["image_url"], "image_url": {"url": "a.png"}}, id="list"),
             body({"type": {"k": 1}, "text": "x"}, id="object"),
             body(image_part("a.png"), {"type": "text", "text": "what?"}, id="good")]
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(lines) + "\n")
    errors = {r.request_id: r.error for r in parse_capture(path).requests}
    assert "unsupported content part type ['image_url']" in errors["list"]
    assert "unsupported content part type {'k': 1}" in errors["object"]
    assert errors["good"] is None
