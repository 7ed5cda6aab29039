"""Where two runs of a video request part when one of them never held the video (as when a capture's video reached the
engine as text): `parting` counts each trace's media items before any tensor and names them, without vLLM."""

from __future__ import annotations

import copy

from qdebug.analysis.engine_compare import media_items, parting

from .client import demo_model
from .test_video import PROMPT, _frames


def _video_trace(tmp_path):
    from qdebug.commands.media_input import model_media, read_media, sort_media
    from qdebug.trace.runner import RecordPolicy, trace_request

    for i, frame in enumerate(_frames()):
        (tmp_path / f"f{i:02d}.jpg").write_bytes(frame)
    return trace_request(demo_model(), read_media(model_media("demo"), sort_media([tmp_path])).request(PROMPT, 2), RecordPolicy(keep_hidden=True))


def test_a_run_without_the_video_parts_at_preprocess_naming_the_counts(tmp_path):
    trace = _video_trace(tmp_path)
    assert media_items(trace) == {"video": 1}
    assert parting(trace, trace).stage is None  # the same run twice agrees at every stage

    lost = copy.deepcopy(trace)  # the same prompt, but the video's item and stages gone (the old text-part bug)
    lost.images = []
    lost.stages["preprocess"].summary.videos = None
    part = parting(trace, lost)
    assert part.stage == "preprocess" and "1 video vs no media item" in part.said, part.said
