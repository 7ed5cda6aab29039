"""One media intake for attn and diff (commands/media_input.py): files sorted by content, checked against the model's
config before any weights load, decoded once; a command line never drops an item it was given."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from qdebug.cli import app
from qdebug.commands.media_input import model_media, read_media, sort_media
from tests.families.build import tone
from tests.video.conftest import write_frames

runner = CliRunner()
SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
IMAGE = SAMPLE / "red_circle_top_left.png"


def test_files_sort_by_content_and_the_demo_takes_images_and_video(tmp_path):
    clip, frames = tone(tmp_path / "clip.bin"), write_frames(tmp_path / "frames")  # a clip named .bin is still a clip
    media = sort_media([IMAGE, clip, frames], [], [])
    assert (media.images, media.clips, media.videos) == ([IMAGE], [clip], [frames])
    demo = model_media("demo")
    assert demo.takes == {"image", "video"} and not demo.mixed


@pytest.mark.parametrize("command", ["attn", "diff"])
def test_a_clip_with_an_image_is_refused_before_loading_naming_both(command, tmp_path):
    """diff used to read only its first argument when it was a clip, dropping the image after it."""
    clip = tone(tmp_path / "clip.wav")
    args = ["attn", str(IMAGE), "Describe.", "--image", str(clip)] if command == "attn" else ["diff", str(clip), "Describe.", "--image", str(IMAGE)]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert f"got image(s) {IMAGE} and audio clip(s) {clip}" in result.output and "Traceback" not in result.output


def test_a_video_flag_beside_a_clip_is_refused_not_dropped(tmp_path):
    """attn used to drop --video when a clip was given."""
    clip, frames = tone(tmp_path / "clip.wav"), write_frames(tmp_path / "frames")
    result = runner.invoke(app, ["attn", str(clip), "Describe.", "--video", str(frames)])
    assert result.exit_code == 2, result.output
    assert f"got video(s) {frames} and other media {clip}" in result.output


def test_a_marker_of_a_kind_the_request_does_not_carry_stays_text(tmp_path):
    """One builder for every kind: `<video>` in an image request's prompt is text (vLLM reads no markers either),
    while a marker of a kind it carries places that item."""
    intake = read_media(model_media("demo"), sort_media([IMAGE]))
    request = intake.request("Is <video> an HTML tag? <image>", 2)
    assert request.parts == [("text", "Is <video> an HTML tag? "), ("image", 0)]
    assert intake.request("Describe.", 2).parts == [("image", 0), ("text", "Describe.")]
