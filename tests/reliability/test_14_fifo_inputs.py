"""Issue 21 item 9: an input path naming a FIFO or device is refused by name, never opened (which blocks forever)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import wave

from .conftest import one_line_error, qdebug


def test_attn_refuses_a_fifo_image(tmp_path):
    fifo = tmp_path / "img.png"
    os.mkfifo(fifo)
    proc = qdebug("attn", fifo, "hi", timeout=60)
    one_line_error(proc, "FIFO", "not a regular file", str(fifo))
    assert proc.returncode == 2


def test_attn_refuses_a_link_to_a_device(tmp_path):
    link = tmp_path / "zero.png"
    link.symlink_to("/dev/zero")
    proc = qdebug("attn", link, "hi", timeout=60)
    one_line_error(proc, "character device", str(link))
    assert proc.returncode == 2


def test_attn_refuses_a_fifo_audio_clip(tmp_path):
    clip = tmp_path / "clip.wav"
    with wave.open(str(clip), "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(16000), w.writeframes(b"\0\0" * 1600)
    fifo = tmp_path / "more.wav"
    os.mkfifo(fifo)
    proc = qdebug("attn", clip, "hi", "--audio", fifo, timeout=60)
    one_line_error(proc, "FIFO", str(fifo))
    assert proc.returncode == 2


def test_a_capture_line_naming_a_fifo_is_a_line_error(tmp_path):
    fifo = tmp_path / "img.png"
    os.mkfifo(fifo)
    capture = tmp_path / "capture.jsonl"
    line = {"id": "a", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "img.png"}}, {"type": "text", "text": "hi"}]}]}
    capture.write_text(json.dumps(line) + "\n")
    code = ("import sys; from qdebug.replay.formats.capture import parse_capture; "
            "print(parse_capture(sys.argv[1]).requests[0].error)")
    proc = subprocess.run([sys.executable, "-c", code, str(capture)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "FIFO" in proc.stdout and "not a regular file" in proc.stdout, proc.stdout
