"""Items 14 and 19: a clip with NaN/Inf samples is refused when it is read, before any weights load (it reached the
waveform strip after the model ran: `ValueError: cannot convert float NaN to integer`); a clip too short for one
encoder row says so, with its length and the model's minimum (it said "0 clip placeholder span(s)")."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import soundfile as sf

from tests.families.build import build_qwen2_5_omni, build_qwen2_audio

from .conftest import one_line_error, qdebug


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Tiny Qwen2-Audio and Qwen2.5-Omni checkpoints, and a copy of the first without its weights."""
    root = tmp_path_factory.mktemp("audio_models")
    audio, omni = build_qwen2_audio(root / "qwen2_audio"), build_qwen2_5_omni(root / "omni")
    bare = root / "no_weights"
    shutil.copytree(audio, bare, ignore=shutil.ignore_patterns("*.safetensors"))
    return {"qwen2_audio": audio, "omni": omni, "no_weights": bare}


def wav(path, samples, rate: int = 16000, channels: int = 1):
    """`samples` written as a float WAV (every channel the same)."""
    data = np.asarray(samples, dtype=np.float32)
    sf.write(path, np.stack([data] * channels, axis=1) if channels > 1 else data, rate, subtype="FLOAT")
    return path


def tone(n: int) -> np.ndarray:
    """n samples of a quiet tone."""
    return 0.5 * np.sin(np.arange(n) / 3.0)


@pytest.mark.parametrize("bad, what", [(np.nan, "NaN"), (np.inf, "+Inf"), (-np.inf, "-Inf")])
def test_non_finite_samples_are_refused_before_the_weights_load(models, tmp_path, bad, what):
    samples = tone(16000)
    samples[4000:4010] = bad
    clip = wav(tmp_path / f"{what}.wav", samples)
    # A checkpoint without weights: reaching the model would be exit 3, "could not load".
    proc = qdebug("attn", clip, "What is it?", "--model", models["no_weights"], "--device", "cpu")
    line = one_line_error(proc, "non-finite audio samples", clip.name, "10 NaN/Inf sample(s)", "sample 4000", "0.250 s")
    assert proc.returncode == 2, line


def test_non_finite_samples_in_a_stereo_clip_are_refused_on_omni(models, tmp_path):
    samples = tone(16000)
    samples[100] = np.nan
    clip = wav(tmp_path / "stereo.wav", samples, channels=2)
    proc = qdebug("attn", clip, "What is it?", "--model", models["omni"], "--device", "cpu")
    one_line_error(proc, "non-finite audio samples", "stereo.wav")
    assert proc.returncode == 2


def test_huge_finite_stereo_is_not_called_non_finite(models, tmp_path):
    # Two channels near float32's largest value: averaged in float32 they overflow to Inf; the clip itself is finite.
    clip = wav(tmp_path / "loud.wav", np.full(16000, 3e38), channels=2)
    proc = qdebug("attn", clip, "What is it?", "--model", models["qwen2_audio"], "--device", "cpu", "--max-new-tokens", "1")
    assert "Traceback" not in proc.stderr and "qdebug: error" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("family, shortest", [("qwen2_audio", 961), ("omni", 321)])
def test_a_clip_too_short_for_an_encoder_row_names_its_length_and_the_minimum(models, tmp_path, family, shortest):
    one = wav(tmp_path / "one.wav", tone(1))
    proc = qdebug("attn", one, "What is it?", "--model", models[family], "--device", "cpu", "--max-new-tokens", "1")
    one_line_error(proc, "audio too short", "one.wav", "1 sample(s) at 16000 Hz", f"at least {shortest} samples")
    assert proc.returncode == 2
    # The minimum is the model's own: one sample less is refused, the minimum itself runs.
    under = wav(tmp_path / "under.wav", tone(shortest - 1))
    proc = qdebug("attn", under, "What is it?", "--model", models[family], "--device", "cpu", "--max-new-tokens", "1")
    one_line_error(proc, "audio too short", f"{shortest - 1} sample(s)")
    enough = wav(tmp_path / "enough.wav", tone(shortest))
    proc = qdebug("attn", enough, "What is it?", "--model", models[family], "--device", "cpu", "--max-new-tokens", "1")
    assert proc.returncode == 0 and "qdebug: error" not in proc.stderr, proc.stderr


def test_a_one_sample_clip_at_another_rate_is_measured_at_the_models_rate(models, tmp_path):
    clip = wav(tmp_path / "short44k.wav", tone(2000), rate=44100)  # 0.045 s: 726 samples at 16 kHz, under 961
    proc = qdebug("attn", clip, "What is it?", "--model", models["qwen2_audio"], "--device", "cpu")
    one_line_error(proc, "audio too short", "short44k.wav", "2000 sample(s) at 44100 Hz", "at least 961 samples at the feature extractor's 16000 Hz")
    assert proc.returncode == 2


def test_a_capture_request_with_nan_audio_is_one_error_request_and_the_rest_replay(models, tmp_path):
    import base64
    import json

    def line(rid: str, clip) -> str:
        data = base64.b64encode(clip.read_bytes()).decode()
        return json.dumps({"id": rid, "messages": [{"role": "user", "content": [
            {"type": "input_audio", "input_audio": {"data": data, "format": "wav"}}, {"type": "text", "text": "What is it?"}]}],
            "max_tokens": 2})

    samples = tone(16000)
    samples[8000] = np.nan
    capture = tmp_path / "c.jsonl"
    capture.write_text(line("nan", wav(tmp_path / "nan.wav", samples)) + "\n" + line("fine", wav(tmp_path / "fine.wav", tone(16000))) + "\n")
    proc = qdebug("replay", capture, "--model", models["qwen2_audio"], "--device", "cpu", "--json", tmp_path / "r.json")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr  # exit 1: one request is an error
    requests = {r["id"]: r for r in json.loads((tmp_path / "r.json").read_text())["requests"]}
    assert requests["nan"]["verdict"] == "error" and "non-finite audio samples" in requests["nan"]["error"], requests["nan"]
    assert requests["fine"]["verdict"] == "ok", requests["fine"]
