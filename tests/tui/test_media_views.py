"""The request screen on a video trace (the demo) and on a Qwen2.5-Omni trace with an image, a clip and a video:
the stage detail names each item (video 0, audio 1, ...) and the token strip folds each placeholder run."""

import pytest

from qdebug.trace.runner import trace_request
from qdebug.tui.app import build_app
from qdebug.tui.screens.request import RequestScreen
from qdebug.tui.widgets.stage_detail import StageDetail
from qdebug.tui.widgets.stage_list import StageList
from tests.conftest import scene

from .conftest import SIZE, text_of, wait_for


@pytest.fixture(scope="module")
def video_trace():
    """The demo model on four scene frames given as one video."""
    from qdebug.commands.common import quiet_transformers
    from qdebug.model.load import load_model
    from qdebug.trace.request import build_media_request
    from qdebug.trace.video_input import frames_video

    quiet_transformers()
    loaded = load_model("demo", "cpu", "float32")
    video = frames_video([scene(30 + i, width=112, height=112).image for i in range(4)], "<frames>")
    return trace_request(loaded, build_media_request("What happens?", videos=[video], max_new_tokens=2))


@pytest.fixture(scope="module")
def omni_trace(tmp_path_factory):
    """A tiny Qwen2.5-Omni thinker on an image, a clip and a video."""
    from qdebug.model.load import load_model
    from qdebug.trace.audio import load_audio
    from qdebug.trace.request import build_media_request
    from qdebug.trace.video_input import frames_video
    from tests.families.build import build_qwen2_5_omni, tone

    root = tmp_path_factory.mktemp("omni_tui")
    loaded = load_model(str(build_qwen2_5_omni(root / "model")), "cpu", "float32")
    video = frames_video([scene(40 + i, width=112, height=112).image for i in range(2)], "<frames>")
    request = build_media_request("Describe.", images=[scene(3, width=112, height=112).image], image_paths=["scene.png"],
                                  clips=[load_audio(tone(root / "tone.wav"))], videos=[video], max_new_tokens=2)
    return trace_request(loaded, request)


async def _detail(trace, stage: str) -> str:
    app = build_app(trace=trace)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RequestScreen) and app.screen.query_one(StageList).rows, what="the stages")
        names = [r.name for r in app.screen.query_one(StageList).rows]
        for _ in range(names.index(stage)):
            await pilot.press("down")
        await pilot.pause()
        return text_of(app.screen.query_one(StageDetail))


async def test_video_trace_names_its_video_and_folds_its_runs(video_trace):
    pre = await _detail(video_trace, "preprocess")
    runs = video_trace.stages["preprocess"].summary.videos[0].runs
    assert "video 0" in pre and "image ?" not in pre
    assert f"<video 0: {runs[0][1] - runs[0][0]} tokens @{runs[0][0]}>" in " ".join(pre.split())
    sync = await _detail(video_trace, "sync")
    assert "video 0" in sync and "temporal_ids" in sync


async def test_omni_trace_names_every_item_at_its_encoder(omni_trace):
    pre = " ".join((await _detail(omni_trace, "preprocess")).split())
    for m in omni_trace.stages["preprocess"].summary.media:
        s, e = m.runs[0]
        assert f"{m.modality} {m.index}" in pre and f"<{m.modality} {m.index}: {e - s} tokens @{s}>" in pre
    sync = await _detail(omni_trace, "sync")
    assert all(word in sync for word in ("image 0", "audio 0", "video 0", "exact"))


async def test_video_attention_is_drawn_per_temporal_slice_with_the_analysis_peak(video_trace):
    """The attention panel of a video: one heatmap per slice, its time, and the peak the analysis finds for that query."""
    import re

    from qdebug.trace.tensor_names import TensorKind as T
    from qdebug.tui.widgets.attention_view import AttentionView

    app = build_app(trace=video_trace)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RequestScreen) and app.screen.query_one(StageList).rows, what="the stages")
        names = [r.name for r in app.screen.query_one(StageList).rows]
        for _ in range(names.index("layer.0")):
            await pilot.press("down")
        await pilot.pause()
        text = " ".join(text_of(app.screen.query_one(AttentionView), width=SIZE[0]).split())
    t = video_trace.images[0].grid_thw[0]
    assert f"video 0 ({t} slices of" in text and all(f"slice {k} t=" in text for k in range(t))
    pos = int(re.search(r"query pos (\d+)", text).group(1))
    # The peak worked out here from the recorded tensor: layer 0's attention (heads × kept queries × visual keys), the
    # shown query's row, averaged over heads, the video's keys in (slice, row, col) order; its time from preprocess.
    video = video_trace.images[0]
    weights = video_trace.tensor(T.LAYER_ATTN, layer=0)[:, video_trace.attn_queries.index(pos), : video.tokens].float().mean(0)
    k, rest = divmod(int(weights.argmax()), video.rows * video.cols)
    seconds = video_trace.stages["preprocess"].summary.videos[0].slice_times[k]
    assert f"peak t={seconds:.2f} s, row {rest // video.cols}, col {rest % video.cols} (slice {k})" in text, text
