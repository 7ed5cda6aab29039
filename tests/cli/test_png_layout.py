"""Every PNG qdebug writes can be read whole: no text cut at the image's edge, none over another, one marker per
event kind; titles say what the panels show."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qdebug.cli import app
from qdebug.render.offset_timeline import drawn_labels

from .png_layout import assert_readable

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
IMAGE, OTHER = SAMPLE / "red_circle_top_left.png", SAMPLE / "blue_square_bottom_right.png"
runner = CliRunner()


def _run(*args: str) -> None:
    result = runner.invoke(app, list(args))
    assert result.exit_code in (0, 1), result.output  # 1: the run found a problem, which is what these pictures show


def _titles(boxes) -> str:
    return " ".join(" ".join(s.split()) for s, _ in boxes)


def test_attn_png_of_one_token_names_that_token_and_fits(tmp_path):
    png = tmp_path / "t2.png"
    _run("attn", str(IMAGE), "Describe the image.", "--device", "cpu", "--max-new-tokens", "4", "--token", "2", "--png", str(png))
    text = _titles(assert_readable(png))
    assert "attention of generated token 2" in text and "each generated token" not in text


def test_attn_png_of_two_images_fits(tmp_path):
    png = tmp_path / "two.png"
    _run("attn", str(IMAGE), "<image> and <image>: describe.", "--image", str(OTHER), "--device", "cpu", "--max-new-tokens", "3",
         "--png", str(png))
    text = _titles(assert_readable(png))
    assert "generated tokens 0–2" in text and "image 1" in text


@pytest.mark.parametrize("extra", [["--inject", "head-first:2"], ["--vary", "paths", "--order", "both"]])
def test_diff_png_keeps_its_axis_label_and_names_the_first_divergence(tmp_path, extra):
    png = tmp_path / "diff.png"
    _run("diff", str(IMAGE), "Describe the image.", "--device", "cpu", "--max-new-tokens", "3", *extra, "--png", str(png))
    text = _titles(assert_readable(png))
    assert "max |a−b| / max |a|" in text
    if extra[0] == "--inject":
        assert "first divergence: layer.2" in text


@pytest.mark.parametrize("source", ["burst.log", "capture.jsonl --inject shared-visual-buffer --seed 0"])
def test_timeline_png_labels_cross_no_bar_and_no_label(tmp_path, source):
    png = tmp_path / "t.png"
    name, *rest = source.split()
    _run("replay", str(SAMPLE / name), *rest, "--timeline-png", str(png))
    labels = drawn_labels(png)
    boxes = assert_readable(png, labels=labels)
    assert not any("left out" in s for s, _ in boxes), "every label found a place"
    # the labels are drawn at all: each of the log's overwrites (writer → previous owner @ offset), each replayed
    # request's sync (read from the inputs, not from the picture)
    if name == "burst.log":
        overwrites = re.findall(r"request_id=(\d+) overwrote buffer at offset (\d+).*\(previously (\d+)\)", (SAMPLE / name).read_text())
        wanted = [f"{new}→{old}@{offset}" for new, offset, old in overwrites]
        assert len(wanted) == 4 and all(any(label.startswith(w) for label in labels) for w in wanted), (wanted, labels)
    else:
        ids = [json.loads(line)["id"] for line in (SAMPLE / name).read_text().splitlines()]
        assert sorted(label.split(":")[0] for label in labels if label.startswith("S ")) == sorted(f"S {i}" for i in ids), labels


def test_timeline_png_of_a_busy_log_fits(tmp_path, monkeypatch):
    """Many requests and writes: labels give way (and are counted) rather than overlap or leave the picture."""
    from tests.logs.log_synth import generate_log

    monkeypatch.setenv("QDEBUG_CACHE_DIR", str(tmp_path / "cache"))
    log, png = tmp_path / "svc.log", tmp_path / "t.png"
    generate_log(log, 2_500, seed=3)
    _run("replay", str(log), "--timeline-png", str(png))
    assert_readable(png, labels=drawn_labels(png))


def test_timeline_png_of_a_large_log_is_binned_and_fits(tmp_path, monkeypatch):
    from tests.logs.log_synth import generate_log

    monkeypatch.setenv("QDEBUG_CACHE_DIR", str(tmp_path / "cache"))
    log, png = tmp_path / "svc.log", tmp_path / "t.png"
    generate_log(log, 20_000, seed=9)
    _run("replay", str(log), "--timeline-png", str(png))
    assert "binned" in _titles(assert_readable(png))


def test_attn_png_of_nearly_flat_attention_prints_no_axis_offset(tmp_path):
    """A random or untrained model's attention can be flat to 1e-7: the colour bars then show plain values, never
    matplotlib's offset text ("1e-7+1.479e-3") drawn over the panels."""
    import re

    import torch

    from qdebug.render.attention_pngs import attention_png
    from qdebug.trace.schema import load_trace
    from qdebug.trace.tensor_names import TensorKind as T, tensor_name

    trace = load_trace(Path(__file__).resolve().parents[1] / "data" / "red_circle.qdt")
    torch.manual_seed(0)
    for layer in trace.tensor_layers(T.LAYER_ATTN):
        name = tensor_name(T.LAYER_ATTN, layer=layer)
        a = trace.tensors[name]
        trace.tensors[name] = torch.full_like(a, 1.479e-3) + 1e-7 * torch.rand_like(a)
    png = attention_png(trace, [], tmp_path / "flat.png", steps=[0])
    texts = [s for s, _ in assert_readable(png)]
    assert not [s for s in texts if re.search(r"e[-\u2212]\d+\s*\+", s)], texts
