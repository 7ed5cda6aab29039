"""Requests with several images: both images' spans, offsets and heatmaps in attn and diff; the same image twice."""

import json
from pathlib import Path

from typer.testing import CliRunner

from qdebug.cli import app

runner = CliRunner()
DATA = Path(__file__).resolve().parents[2] / "sample_data"
A, B = str(DATA / "green_triangle_top_right.png"), str(DATA / "red_circle_top_left.png")


def test_attn_two_images_reports_both(tmp_path):
    png = tmp_path / "two.png"
    result = runner.invoke(app, ["attn", A, "Compare <image> and <image>.", "--image", B, "--device", "cpu", "--max-new-tokens", "4",
                                 "--json", "-", "--png", str(png)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    first, second = data["images"]
    assert first["span"][1] <= second["span"][0]
    for img in (first, second):
        assert img["visual_offset"] == img["text_offset"] == img["span"][0]
        peak = img["attention_peak"]
        assert peak is not None and (peak["rows"], peak["cols"]) == tuple(img["grid"])
    assert [i["path"] for i in data["images"]] == [A, B]
    assert png.stat().st_size > 1000
    assert not data["findings"]


def test_diff_two_images_reports_both():
    result = runner.invoke(app, ["diff", A, "Compare <image> and <image>.", "--image", B, "--vary", "paths", "--device", "cpu",
                                 "--max-new-tokens", "4", "--json", "-"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["first_divergence"] is None
    first, second = data["images"]
    assert first["span"][1] <= second["span"][0]
    for img in (first, second):
        assert img["a_visual_offset"] == img["b_visual_offset"] == img["text_offset"] == img["span"][0]
        assert img["a_attention_peak"] is not None and img["a_attention_peak"] == img["b_attention_peak"]


def test_same_image_twice_is_no_desync():
    """Issue 11 item 13: the second copy's rows are found at its own span, not at the first copy's."""
    result = runner.invoke(app, ["attn", A, "Compare <image> and <image>.", "--image", A, "--device", "cpu", "--max-new-tokens", "3",
                                 "--json", "-"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [f["kind"] for f in data["findings"]] == []
    first, second = data["images"]
    assert first["visual_offset"] == first["span"][0] and second["visual_offset"] == second["span"][0]
    assert first["span"][0] != second["span"][0]


def test_diff_terminal_shows_each_images_heatmap_in_both_runs():
    result = runner.invoke(app, ["diff", A, "Compare <image> and <image>.", "--image", B, "--vary", "paths", "--device", "cpu",
                                 "--max-new-tokens", "3"])
    assert result.exit_code == 0, result.output
    for image in (0, 1):
        assert result.output.count(f"image {image} ← all generated tokens") == 2
    assert "A visual offset" in result.output
