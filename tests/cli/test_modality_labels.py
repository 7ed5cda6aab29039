"""Labels by modality (issue 36): a video is "video 0" in the report, its diff and its PNG; attention PNGs name their
row/column axes, a video's panels share one colour scale with a colorbar, and panels with their own scales say so."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qdebug.cli import app
from qdebug.render.png_text import read_text_boxes
from tests.video.conftest import write_frames

from .png_layout import assert_readable

IMAGE = Path(__file__).resolve().parents[2] / "sample_data" / "red_circle_top_left.png"
WIDE = {"COLUMNS": "220"}


@pytest.fixture(scope="module")
def frames(tmp_path_factory) -> Path:
    """Four frames, two temporal slices."""
    return write_frames(tmp_path_factory.mktemp("video") / "frames")


def _run(*args: str) -> str:
    result = CliRunner().invoke(app, list(args), env=WIDE)
    assert result.exit_code in (0, 1), result.output
    return result.output


def _texts(png: Path) -> list[str]:
    return [" ".join(s.split()) for s, _ in read_text_boxes(png)[1]]


def test_a_video_is_labelled_video_in_the_report_and_its_png_has_one_scale_and_axes(frames, tmp_path):
    png = tmp_path / "v.png"
    shown = _run("attn", str(frames), "Describe the video.", "--max-new-tokens", "2", "--device", "cpu", "--png", str(png))
    encode = next(line for line in shown.splitlines() if line.strip("│ ").startswith("encode"))
    assert "video 0:" in encode and "img " not in encode, encode
    assert not re.search(r"\bimg \d", shown) and "image 0" not in shown
    texts = _texts(png)
    assert "attention (one scale per video)" in texts, texts  # the colorbar's label: one scale for every slice
    assert texts.count("patch row") == 2 and texts.count("patch column") == 2, texts  # each slice's axes
    assert_readable(png)


def test_attention_panels_with_their_own_scales_say_so_and_name_their_axes(tmp_path):
    png = tmp_path / "a.png"
    _run("attn", str(IMAGE), "Describe the image.", "--device", "cpu", "--max-new-tokens", "3", "--png", str(png))
    texts = _texts(png)
    title = next(t for t in texts if t.startswith("attention of"))
    assert "each panel has its own colour scale" in title, title
    assert texts.count("patch row") == 3 and texts.count("patch column") == 3, texts
    assert_readable(png)


def test_one_panel_claims_no_scale_of_its_own(tmp_path):
    png = tmp_path / "one.png"
    _run("attn", str(IMAGE), "Describe the image.", "--device", "cpu", "--max-new-tokens", "3", "--token", "1", "--png", str(png))
    assert not any("own colour scale" in t for t in _texts(png))


def test_a_video_diff_says_video(frames):
    shown = _run("diff", str(frames), "Describe the video.", "--max-new-tokens", "2", "--device", "cpu")
    assert "diff (video-first)" in shown and "diff (image-first)" not in shown, shown
    assert re.search(r"^\s+videos\s*$", shown, re.M), shown  # the table of the video's offsets and peaks
    assert "video 0 ← all generated tokens" in shown and "image 0" not in shown
