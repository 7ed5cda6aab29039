"""A trace's media items as one typed list (`trace.items.trace_items`): an image, a video, a Qwen2-Audio clip and an
Omni request's three encoders, each item's span, rows and grid checked against the placeholders in the input ids; and
an old saved trace (tests/data) reads through the same accessor. A video's per-step peak says modality "video" while
its `--json` keys stay the image ones docs/commands/attn.md lists."""

from __future__ import annotations

from pathlib import Path

import pytest

from qdebug.analysis.attention import attention_grid, step_peak
from qdebug.trace.items import items_of, trace_items
from qdebug.trace.runner import RecordPolicy, trace_request
from tests.video.conftest import write_frames

DATA = Path(__file__).resolve().parents[1] / "data"


def _placeholders(trace, token_id: int) -> list[int]:
    return [i for i, t in enumerate(trace.input_ids) if t == token_id]


def _positions(item) -> list[int]:
    return [p for s, e in item.runs for p in range(s, e)]


def test_an_image_trace(family_model, tmp_path):
    from qdebug.trace.request import build_request
    from tests.conftest import scene

    loaded = family_model("qwen2_vl")
    paths = [tmp_path / "a.png", tmp_path / "b.png"]
    for n, p in enumerate(paths):
        scene(n, width=112, height=84).image.save(p)
    trace = trace_request(loaded, build_request("Compare <image> and <image>.", list(paths), max_new_tokens=2))
    items = trace_items(trace)
    assert [(i.modality, i.index, i.item, i.image) for i in items] == [("image", 0, 0, 0), ("image", 1, 1, 1)]
    assert _placeholders(trace, loaded.config.image_token_id) == [p for i in items for p in _positions(i)]
    for item, info in zip(items, trace.images):
        assert (item.span, item.rows, item.grid_thw, item.grid, item.source) == (info.span, info.tokens, info.grid_thw, (info.rows, info.cols), info.path)
        assert item.rows == item.span[1] - item.span[0] and item.frame_times is None and item.seconds_per_row is None
    peak = step_peak(trace, 0)
    assert peak is not None and peak.modality == "image" and list(peak.to_json())[0] == "image"


def test_a_video_trace(family_model, tmp_path):
    from qdebug.trace.request import build_media_request
    from qdebug.trace.video_input import load_video

    loaded = family_model("qwen2_vl")
    frames = write_frames(tmp_path / "frames")
    trace = trace_request(loaded, build_media_request("Describe the video.", videos=[load_video(frames)], max_new_tokens=2), RecordPolicy())
    (item,) = trace_items(trace)
    prep = trace.stages["preprocess"].summary.videos[0]
    assert (item.modality, item.index, item.image, item.source) == ("video", 0, 0, trace.images[0].path)
    assert _positions(item) == _placeholders(trace, loaded.config.video_token_id)
    t, h, w = item.grid_thw
    assert t == 2 and item.rows == len(_positions(item)) == t * item.grid[0] * item.grid[1]
    assert item.frame_times == tuple(prep.frame_times) and len(item.slice_times) == t
    assert items_of(trace, "image") == [] and items_of(trace, "video") == [item]
    peak = step_peak(trace, 0)
    grid = attention_grid(trace, 0, queries=[len(trace.input_ids) - 1])
    assert peak is not None and grid is not None and peak.modality == "video" and peak.slice is None
    # the typed peak knows it is a video's; the JSON keeps the keys steps[].attention_peak always had
    assert peak.to_json() == {"image": 0, "row": peak.row, "col": peak.col, "rows": item.grid[0], "cols": item.grid[1]}
    assert peak.label() == f"row {peak.row}, col {peak.col}" and peak.value == pytest.approx(float(grid.max()))

    from qdebug.render.media_words import is_video
    from qdebug.trace.schema import load_trace, save_trace
    from qdebug.tui.widgets.stage_detail import placeholder_runs

    assert is_video(trace) and {label for _, label in placeholder_runs(trace).values()} == {"video 0"}
    assert trace_items(load_trace(save_trace(trace, tmp_path / "v.qdt"))) == [item]  # saved and read back: the same items
    old = load_trace(tmp_path / "v.qdt")
    old.stages["preprocess"].summary.videos = None  # a video trace written before `videos` was traced
    (was,) = trace_items(old)
    assert (was.modality, was.span, was.rows, was.grid, was.runs) == ("video", item.span, item.rows, item.grid, (item.span,))
    assert was.frame_times is None and was.slice_times is None


def test_an_audio_trace(qwen2_audio, clip_wav):
    from qdebug.trace.audio import load_audio
    from qdebug.trace.request import build_media_request

    trace = trace_request(qwen2_audio, build_media_request("What is it? <audio> and <audio>", clips=[load_audio(clip_wav)] * 2, max_new_tokens=2))
    items = trace_items(trace)
    assert [(i.modality, i.index, i.item, i.image, i.grid) for i in items] == [("audio", 0, 0, None, None), ("audio", 1, 1, None, None)]
    assert [p for i in items for p in _positions(i)] == _placeholders(trace, qwen2_audio.config.audio_token_id)
    for item, clip in zip(items, trace.meta.audio):
        assert item.rows == 25 == item.span[1] - item.span[0] and item.seconds_per_row == pytest.approx(0.04)
        assert item.seconds == clip["seconds"] == pytest.approx(1.0)
    assert step_peak(trace, 0) is None  # no grid to peak on: the clips' peaks are audio_step_peak's

    from qdebug.tui.widgets.stage_detail import placeholder_runs

    assert sorted(placeholder_runs(trace).items()) == [(i.span[0], (i.span[1], f"clip {i.index}")) for i in items]
    trace.meta.audio = [{"index": 0, "span": list(items[0].span)}]  # an entry lacking the newer keys still reads
    (old,) = trace_items(trace)
    assert (old.rows, old.seconds_per_row, old.seconds, old.source) == (25, None, None, "<audio 0>")
    trace.meta.audio = [{"index": 0, "span": list(items[0].span), "seconds_per_row": 0.04}]  # no "seconds": rows × seconds per row
    (old,) = trace_items(trace)
    assert old.seconds == pytest.approx(1.0)

    from rich.console import Console

    from qdebug.analysis.item_attention import attention_strip
    from qdebug.render.audio_strip import strip_panel

    console = Console(width=100, record=True)  # the clip's strip panel draws from the item, not from keys the entry lacks
    console.print(strip_panel(trace, old, attention_strip(trace, 0, queries=[trace.attn_queries[-1]]), "clip 0"))
    drawn = console.export_text()
    assert "1.00 s" in drawn and "40 ms per row" in drawn


def test_an_omni_trace_lists_every_encoder_item(family_model, tmp_path):
    from qdebug.trace.audio import load_audio
    from qdebug.trace.request import build_media_request
    from qdebug.trace.request import load_image
    from qdebug.trace.video_input import load_video
    from tests.conftest import scene

    from .build import tone, video_with_sound

    loaded = family_model("qwen2_5_omni")
    png, wav, mp4 = tmp_path / "scene.png", tone(tmp_path / "tone.wav"), video_with_sound(tmp_path / "clip.mp4")
    scene(5, width=112, height=112).image.save(png)
    request = build_media_request("Describe <image>, <audio> and <video>.", images=[load_image(png)], image_paths=[str(png)],
                                  clips=[load_audio(wav)], videos=[load_video(mp4, fps=1.0)], video_paths=[str(mp4)], max_new_tokens=2)
    trace = trace_request(loaded, request)
    items = trace_items(trace)
    assert [(i.modality, i.index, i.item) for i in items] == [("image", 0, 0), ("audio", 0, 1), ("video", 0, 2)]
    assert [i.image for i in items] == [0, None, None]  # attention is kept over the image only
    for item, attr in zip(items, ("image_token_index", "audio_token_index", "video_token_index")):
        assert _positions(item) == _placeholders(trace, getattr(loaded.config, attr)) and item.rows == len(_positions(item))
    image, _, video = items
    assert image.grid == (trace.images[0].rows, trace.images[0].cols) and video.grid is not None
    assert video.rows == video.grid_thw[0] * video.grid[0] * video.grid[1]
    peak = step_peak(trace, 0)
    assert peak is not None and (peak.modality, peak.index) == ("image", 0)


def test_an_old_saved_trace_reads_through_the_accessor():
    from qdebug.trace.schema import load_trace

    trace = load_trace(DATA / "red_circle.qdt")  # written before videos, media and audio were traced
    (item,) = trace_items(trace)
    info = trace.images[0]
    assert (item.modality, item.index, item.span, item.rows, item.grid) == ("image", 0, info.span, info.tokens, (info.rows, info.cols))
    assert item.runs == (info.span,) and item.name == "image 0"
