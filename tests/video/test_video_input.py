"""Reading videos: frame folders in name order, files decoded with PyAV, sampling by --fps and --max-frames, refusals."""

from __future__ import annotations

import pytest

from qdebug.trace.video_input import VideoError, is_video_source, load_video, sample

from .conftest import write_frames


def test_a_frame_folder_plays_at_two_fps_in_name_order(frames_dir):
    v = load_video(frames_dir)
    assert v.indices == [0, 1, 2, 3] and v.times == [0.0, 0.5, 1.0, 1.5] and v.source_fps == 2.0 and v.total_frames == 4
    assert v.size == (112, 84) and v.frames[0].getpixel((100, 80)) != v.frames[3].getpixel((100, 80))
    assert load_video(frames_dir, fps=4.0).times == [0.0, 0.25, 0.5, 0.75]  # --fps says the folder's own rate


def test_a_file_is_decoded_at_its_own_rate_then_sampled(mp4):
    assert is_video_source(mp4)
    v = load_video(mp4)
    assert v.source_fps == 4.0 and v.total_frames == 8 and v.indices == list(range(8))
    assert v.times == [i / 4 for i in range(8)]
    half = load_video(mp4, fps=2.0)
    assert half.indices == [0, 2, 4, 6] and half.times == [0.0, 0.5, 1.0, 1.5]
    few = load_video(mp4, max_frames=3)
    assert few.indices == [0, 4, 7] and few.times == [0.0, 1.0, 1.75]


def test_sampling_is_even_and_bounded():
    assert sample(10, 10.0, 5.0, 64) == [0, 2, 4, 6, 8]
    assert sample(10, 10.0, None, 4) == [0, 3, 6, 9]
    assert sample(1, 30.0, 1.0, 64) == [0]


@pytest.mark.parametrize("case", ["missing", "garbage", "empty", "sizes", "fps"])
def test_bad_videos_are_refused_with_the_path(tmp_path, case):
    if case == "missing":
        path, expect = tmp_path / "nope.mp4", "video not found"
    elif case == "garbage":
        path, expect = tmp_path / "fake.mp4", "undecodable video"
        path.write_bytes(b"\x00\x00\x00\x18ftypmp42" + b"\x00" * 200)  # an MP4 header and nothing after it
    elif case == "empty":
        path, expect = tmp_path / "empty", "empty frame folder"
        path.mkdir()
    elif case == "sizes":
        path, expect = write_frames(tmp_path / "mixed"), "frames of different sizes"
        write_frames(tmp_path / "mixed", colours=((1, 2, 3),), size=(64, 64))  # frame_000 replaced by a smaller one
    else:
        path, expect = write_frames(tmp_path / "ok"), "--fps 0"
    with pytest.raises(VideoError) as err:
        load_video(path, fps=0 if case == "fps" else None)
    message = err.value.message
    assert expect in message and "\n" not in message
    assert str(path) in message or case == "fps"
