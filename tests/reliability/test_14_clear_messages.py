"""Issue 21 item 24: messages name the real problem (values as written, no Python object reprs, devices by kind),
and an audio/image mismatch is caught from config.json before any weights load."""

from __future__ import annotations

import json
import shutil
import wave

import pytest

from qdebug.model.load import DEMO_DIR

from .conftest import one_line_error, qdebug


@pytest.fixture(scope="module")
def config_only(tmp_path_factory):
    folder = tmp_path_factory.mktemp("config-only")
    shutil.copy(DEMO_DIR / "config.json", folder / "config.json")
    return folder


def _wav(path):
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(16000), w.writeframes(b"\0\0" * 1600)
    return path


def test_manifest_value_of_the_wrong_type_is_shown_as_written(tmp_path, red_png):
    out = tmp_path / "export"
    assert qdebug("export", "onnx", "--out", out, timeout=600).returncode == 0
    manifest = out / "qdebug-onnx.json"
    doc = json.loads(manifest.read_text())
    doc["model"]["layers"] = "4"
    manifest.write_text(json.dumps(doc))
    proc = qdebug("diff", red_png, "Describe.", "--onnx", out, timeout=600)
    line = one_line_error(proc, 'model.layers is "4" (text)', "expected a number")
    assert "4 vs 4" not in line and proc.returncode == 2


def test_corrupt_audio_names_the_file_not_a_buffer(tmp_path):
    bad = tmp_path / "bad.wav"
    bad.write_bytes(b"RIFF\x24\x00\x00\x00WAVEfmt " + b"\x00" * 40)
    proc = qdebug("attn", bad, "Describe.", timeout=120)
    line = one_line_error(proc, "corrupt audio", str(bad), "fmt")
    assert "BytesIO" not in line and " at 0x" not in line


def test_audio_for_an_image_model_is_refused_before_weights(tmp_path, config_only):
    proc = qdebug("attn", _wav(tmp_path / "clip.wav"), "Describe.", "--model", config_only, timeout=120)
    one_line_error(proc, "takes image input", "audio clip(s)")
    assert proc.returncode == 2  # the weights (missing here: exit 3) were never reached


def test_diff_audio_for_an_image_model_is_refused_before_weights(tmp_path, config_only):
    proc = qdebug("diff", _wav(tmp_path / "clip.wav"), "Describe.", "--model", config_only, timeout=120)
    one_line_error(proc, "takes image input", "audio clip(s)")
    assert proc.returncode == 2


def test_a_trace_linked_to_dev_zero_is_named_a_device(tmp_path):
    link = tmp_path / "t.qdt"
    link.symlink_to("/dev/zero")
    proc = qdebug("diff", link, link, timeout=60)
    line = one_line_error(proc, "character device", str(link))
    assert "not found" not in line and proc.returncode == 2


@pytest.mark.parametrize("fmt", [["--format", "capture"], ["--format", "runtime-log"], []])
def test_replay_of_dev_zero_is_named_a_device(fmt):
    proc = qdebug("replay", "/dev/zero", *fmt, timeout=60)
    line = one_line_error(proc, "/dev/zero", "character device")
    assert "memory" not in line and proc.returncode == 2
