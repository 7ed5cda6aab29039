"""Items 11 and 14: a clip of huge but finite samples runs, and the model's own NaN (the features overflow) is reported
by the NaN checks alone: rows copied to their placeholders bit for bit are in place, NaN or not (Omni added a false
"rows at its own placeholders failed (max |diff| nan)", Qwen2-Audio "its rows are not in the stream"), and the
report and the PNG draw the clip (the waveform strip raised `ValueError: cannot convert float NaN to integer`)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf

from tests.families.build import build_qwen2_5_omni, build_qwen2_audio

from .conftest import qdebug


@pytest.fixture(scope="module")
def loud(tmp_path_factory):
    """Two tiny checkpoints and a 1 s clip whose samples reach 1e30: finite, far past what a log-mel spectrum holds."""
    root = tmp_path_factory.mktemp("loud")
    clip = root / "loud.wav"
    sf.write(clip, (np.sin(np.arange(16000) / 10.0) * 1e30).astype(np.float32), 16000, subtype="FLOAT")
    return {"qwen2_audio": build_qwen2_audio(root / "qwen2_audio"), "omni": build_qwen2_5_omni(root / "omni"), "clip": clip}


@pytest.mark.parametrize("family", ["qwen2_audio", "omni"])
def test_nan_rows_at_their_placeholders_are_reported_as_nan_only(loud, tmp_path, family):
    proc = qdebug("attn", loud["clip"], "What is it?", "--model", loud[family], "--device", "cpu", "--max-new-tokens", "2",
                  "--json", tmp_path / "r.json", "--png", tmp_path / "r.png")
    assert "Traceback" not in proc.stderr and "qdebug: error" not in proc.stderr, proc.stderr
    findings = json.loads((tmp_path / "r.json").read_text())["findings"]
    kinds = {(f["kind"], f["stage"]) for f in findings}
    assert ("nan_inf", "encode") in kinds, findings  # the model's NaN, where it starts
    assert not [f for f in findings if f["stage"] == "sync"], findings  # the rows did land at their placeholders
    assert proc.returncode == 1  # the nan_inf findings are errors: exit 1, as for any ERROR finding
    if family == "qwen2_audio":  # the clip's waveform and attention strip (Omni's report draws its items otherwise)
        assert "attention is not finite" in proc.stdout and "waveform" in proc.stdout
    assert (tmp_path / "r.png").stat().st_size > 0


def test_sync_summary_says_its_rows_are_in_place_bit_for_bit(loud, tmp_path):
    proc = qdebug("attn", loud["clip"], "What is it?", "--model", loud["omni"], "--device", "cpu", "--max-new-tokens", "1",
                  "--save", tmp_path / "t.qdt")
    assert proc.returncode == 1, proc.stderr
    from qdebug.trace.schema import load_trace
    from qdebug.vocab import StageName

    trace = load_trace(tmp_path / "t.qdt")
    span = trace.stages[StageName.SYNC].summary.media[0]
    assert span.modality == "audio" and span.exact is True and span.max_abs_diff == 0.0, span
    assert trace.stages[StageName.ENCODE].summary.media[0].stats.nan > 0  # it was NaN, and in place
