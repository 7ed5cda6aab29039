"""One peak type for image, video and audio attention: each modality's `--json` keys stay the ones `attn` always wrote,
and a saved image trace's peak reads back through it."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from qdebug.analysis import item_attention
from qdebug.analysis.attention import Peak, attention_grid, peak_of, step_peak

DATA = Path(__file__).resolve().parents[1] / "data"


def test_each_modality_keeps_its_json_keys_and_words():
    image = Peak(modality="image", index=1, row=2, col=3, rows=4, cols=6, value=0.5)
    assert image.to_json() == {"image": 1, "row": 2, "col": 3, "rows": 4, "cols": 6}
    assert image.label() == "row 2, col 3"
    video = Peak(modality="video", index=0, slice=1, seconds=1.25, row=0, col=3, rows=3, cols=4, value=0.1)
    assert video.to_json() == {"video": 0, "slice": 1, "time_s": 1.25, "row": 0, "col": 3, "rows": 3, "cols": 4}
    assert video.label() == "t=1.25 s, row 0, col 3"
    audio = Peak(modality="audio", index=0, row=21, rows=25, seconds=0.8400000000000001, value=0.02)
    assert audio.to_json() == {"clip": 0, "row": 21, "rows": 25, "seconds": 0.84, "value": 0.02}
    assert list(audio.to_json()) == ["clip", "row", "rows", "seconds", "value"]  # the order `attn --json` wrote
    assert audio.label() == "0.84 s (row 21 of 25)"
    unknown = Peak(modality="video", index=0, slice=2, seconds=float("nan"), row=0, col=0, rows=1, cols=1, value=0.0)
    assert math.isnan(unknown.to_json()["time_s"])  # a slice without a time: NaN (null in the written JSON), as before


def test_the_old_per_modality_classes_are_gone():
    assert not hasattr(item_attention, "VideoPeak") and not hasattr(item_attention, "AudioPeak")
    with pytest.raises(TypeError):
        Peak(0, 1, 2, 3, 4, 0.5)  # type: ignore[misc]  # keywords only: no positional mix-up of row/col/rows


def test_a_saved_image_trace_peaks_through_the_one_type():
    from qdebug.trace.schema import load_trace

    trace = load_trace(DATA / "red_circle.qdt")
    step = step_peak(trace, 0)
    grid = attention_grid(trace, 0, queries=[len(trace.input_ids) - 1])
    assert step is not None and grid is not None
    assert step == peak_of(grid, 0) and step.modality == "image" and step.slice is None and step.seconds is None
    assert (step.rows, step.cols) == (trace.images[0].rows, trace.images[0].cols)
    assert step.value == pytest.approx(float(grid.max()))
