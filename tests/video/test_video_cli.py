"""`qdebug attn` on a video through Typer's CliRunner and as the installed command: the JSON, the Rich report and the
PNG of one run name the same peak (time s, row, col); bad videos get one-line errors and leave nothing behind.

The demo never learned video: the peak is checked for agreement between the three outputs and the trace, not for
where it lands."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from qdebug.cli import app

from .conftest import write_frames

runner = CliRunner()
PEAK = re.compile(r"t=(\d+\.\d\d) s, row (\d+), col (\d+) \(slice (\d+)\)")


def test_json_report_and_png_name_one_peak(frames_dir, tmp_path):
    from qdebug.analysis.item_attention import drawn_as, video_peak
    from qdebug.render.png_text import read_text_boxes
    from qdebug.trace.schema import load_trace

    js, png, qdt = tmp_path / "v.json", tmp_path / "v.png", tmp_path / "v.qdt"
    result = runner.invoke(app, ["attn", str(frames_dir), "Describe the video.", "--max-new-tokens", "3", "--device", "cpu",
                                 "--json", str(js), "--png", str(png), "--save", str(qdt)])
    assert result.exit_code == 0, result.output
    data = json.loads(js.read_text())
    assert data["images"] == [] and len(data["videos"]) == 1
    video = data["videos"][0]
    assert video["frame_indices"] == [0, 1, 2, 3] and video["frame_times"] == [0.0, 0.5, 1.0, 1.5]
    assert video["grid_thw"] == [2, 6, 8] and video["slice_times"] == [0.25, 1.25] and video["temporal_patch_size"] == 2
    assert video["temporal_ids"] == video["expected_temporal_ids"] and len(set(video["temporal_ids"])) == 2
    peak = video["attention_peak"]
    from_json = (f"{peak['time_s']:.2f}", str(peak["row"]), str(peak["col"]), str(peak["slice"]))

    (from_report,) = PEAK.findall(result.stdout)  # the Rich report's line
    _, boxes = read_text_boxes(png)
    drawn = " ".join(" ".join(text.split()) for text, _ in boxes)
    (from_png,) = PEAK.findall(drawn)  # the PNG's own words, as save() recorded them
    traced = video_peak(load_trace(qdt), 0)  # recomputed from the saved trace's tensors
    assert drawn_as(load_trace(qdt)) == "video"  # the PNG drawer and the TUI's form are the video ones
    assert from_json == from_report == from_png == (f"{traced.time():.2f}", str(traced.row), str(traced.col), str(traced.slice))
    assert float(peak["time_s"]) in video["slice_times"]
    assert "temporal ids [" in result.stdout and "video 0: 4 frames" in result.stdout
    from tests.cli.png_layout import assert_readable

    assert_readable(png)  # no text cut off or drawn over another


def test_two_videos_a_folder_and_a_file_sampled_at_fps_on_qwen2_5_vl(family_spec, frames_dir, mp4):
    result = runner.invoke(app, ["attn", str(frames_dir), "Describe the videos.", "--video", str(mp4), "-m", family_spec("qwen2_5_vl"),
                                 "--device", "cpu", "--fps", "2", "--max-new-tokens", "2", "--json", "-"])
    assert result.exit_code == 0, result.output
    folder, clip = json.loads(result.stdout)["videos"]
    assert folder["frame_indices"] == [0, 1, 2, 3] and folder["frame_times"] == [0.0, 0.5, 1.0, 1.5]  # a folder plays at --fps
    assert clip["frame_indices"] == [0, 2, 4, 6] and clip["frame_times"] == [0.0, 0.5, 1.0, 1.5]  # a 4 fps file sampled at 2
    for video in (folder, clip):
        assert video["grid_thw"][0] == 2 and video["temporal_ids"] == video["expected_temporal_ids"]
        assert video["attention_peak"]["time_s"] in video["slice_times"]
    assert folder["runs"][0][1] <= clip["runs"][0][0]  # the folder first, then the --video


def _bad(args, tmp_path, expect):
    outs = [tmp_path / "o.png", tmp_path / "o.json"]
    before = set(tmp_path.iterdir())
    result = runner.invoke(app, [*args, "--png", str(outs[0]), "--json", str(outs[1]), "--device", "cpu"])
    assert result.exit_code not in (0, None), result.output
    err = result.stderr.strip()
    assert len(err.splitlines()) == 1 and err.startswith("qdebug: error:"), err
    assert expect in err, err
    assert "Traceback" not in result.output
    assert set(tmp_path.iterdir()) == before  # nothing half-written


@pytest.mark.parametrize("case", ["missing", "undecodable", "empty", "sizes", "audio-model"])
def test_bad_videos_get_one_line_errors(tmp_path, frames_dir, case, tmp_path_factory):
    work = tmp_path_factory.mktemp("in")
    if case == "missing":
        args, expect = ["attn", str(frames_dir), "x", "--video", str(work / "nope.mp4")], "video not found"
    elif case == "undecodable":
        bad = work / "cut.mp4"
        bad.write_bytes(b"\x00\x00\x00\x18ftypmp42" + b"\x00" * 64)
        args, expect = ["attn", str(bad), "x"], f"undecodable video: {bad}"
    elif case == "empty":
        (work / "none").mkdir()
        args, expect = ["attn", str(work / "none"), "x"], "empty frame folder"
    elif case == "sizes":
        folder = write_frames(work / "mixed")
        write_frames(folder, colours=((9, 9, 9),), size=(56, 56))
        args, expect = ["attn", str(folder), "x"], "frames of different sizes"
    else:
        from tests.families.build import build_qwen2_audio

        model = build_qwen2_audio(work / "audio")
        args, expect = ["attn", str(frames_dir), "x", "-m", str(model)], "has no video placeholder"
    _bad(args, tmp_path, expect)


def test_the_installed_command_traces_a_video(frames_dir, tmp_path):
    from tests.cli.installed import qdebug

    code, out, err = qdebug(tmp_path, "attn", frames_dir, "Describe the video.", "--max-new-tokens", "2", "--json", "-")
    assert code == 0, err
    data = json.loads(out)
    assert data["videos"][0]["frame_times"] == [0.0, 0.5, 1.0, 1.5] and data["videos"][0]["attention_peak"] is not None
    code, out, err = qdebug(tmp_path, "attn", tmp_path / "absent-folder", "x", "--video", tmp_path / "absent.mp4")
    assert code != 0 and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_video_diff_names_its_rows_video_and_says_where_they_landed(frames_dir):
    """`qdebug diff VIDEO` with the video's temporal ids flattened: the first divergent row is one of the video's (named
    `video`, never `image`), and the videos table says where each run's rows landed (its placeholders), not "–"."""
    result = runner.invoke(app, ["diff", str(frames_dir), "Describe the video.", "--inject", "temporal-ids-flat", "--device", "cpu",
                                 "--max-new-tokens", "2", "--json", "-"])
    assert result.exit_code == 1, result.output  # the position ids part: an error finding
    data = json.loads(result.stdout)
    first = data["first_divergence"]
    (video,) = data["images"]
    start, end = video["span"]
    assert first["stage"] == "sync" and first["token_kind"] == "video" and start <= first["token_index"] < end, first
    assert video["a_visual_offset"] == video["b_visual_offset"] == video["text_offset"] == start, video
    shown = CliRunner().invoke(app, ["diff", str(frames_dir), "Describe the video.", "--inject", "temporal-ids-flat", "--device", "cpu",
                                     "--max-new-tokens", "2"], env={"COLUMNS": "200"}).output
    assert f"token {first['token_index']} (video)" in shown and "(image)" not in shown
    row = next(line for line in shown.splitlines() if line.startswith("│ 0 ") and f"{start}..{end}" in line)
    assert [c.strip() for c in row.strip("│").split("│")][2:4] == [str(start), str(start)], row
