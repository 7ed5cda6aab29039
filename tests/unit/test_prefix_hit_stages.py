"""The sync checks of every media kind after a prefix-cache hit (an engine trace whose rows start at prompt position
`first`): an audio clip, a mixed-media item and a video are checked at the placeholders the run computed, and one the
cache served whole is said, not failed."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from qdebug.engine.engine_video import VideoSlices
from qdebug.trace.schema import ImageInfo
from qdebug.trace.stages.audio import clip_stages
from qdebug.trace.stages.media import item_landed
from qdebug.trace.stages.video import video_sync
from qdebug.trace.summaries import EncoderSpan

PROMPT, FIRST = 14, 5  # a 14-position prompt whose positions 0..4 the prefix cache served
ROWS = torch.randn(8, 6)  # the item's encoder rows, at placeholders 2..9


def _stream() -> torch.Tensor:
    """The decoder's input rows of the whole prompt, the item's rows at its placeholders."""
    embeds = torch.randn(PROMPT, 6)
    embeds[2:10] = ROWS
    return embeds


def test_an_audio_clip_is_checked_at_the_placeholders_the_run_computed():
    clip = {"index": 0, "span": [2, 10], "frames": 80, "rows": 8}
    stages = clip_stages([clip], {0: ROWS}, 8, _stream()[FIRST:], torch.arange(PROMPT)[FIRST:].expand(3, -1), torch.arange(PROMPT), {},
                         FIRST, {0: "its first 3 of 8 placeholders served from the prefix cache, computed by a"})
    sync = stages["sync"]
    assert sync.ok, [(c.name, c.detail) for c in sync.checks]
    (synced,) = sync.summary.audio
    assert (synced.text_offset, synced.audio_offset, synced.max_abs_diff) == (2, 2, 0.0) and "computed by a" in synced.cached
    whole = clip_stages([clip], {}, 8, _stream()[11:], torch.arange(PROMPT)[11:].expand(3, -1), torch.arange(PROMPT), {}, 11,
                        {0: "served whole from the prefix cache"})
    assert whole["encode"].ok and whole["sync"].ok
    assert whole["encode"].summary.audio[0].cached == whole["sync"].summary.audio[0].cached == "served whole from the prefix cache"


def test_a_mixed_media_item_is_checked_at_the_placeholders_the_run_computed():
    span = EncoderSpan(modality="audio", index=0, item=0, runs=[[2, 10]], expected=8)
    checks = item_landed(span, ROWS, list(range(2, 10)), _stream()[FIRST:], FIRST, "served by a")
    assert all(c.ok for c in checks) and span.exact and span.cached == "served by a" and span.placeholders == 8
    moved = _stream()[FIRST:]
    moved[2] += 1  # position 7: a computed placeholder holding other rows
    assert not item_landed(EncoderSpan(modality="audio", index=0, item=0, expected=8), ROWS, list(range(2, 10)), moved, FIRST)[1].ok
    whole = EncoderSpan(modality="audio", index=0, item=0, expected=8)
    assert item_landed(whole, None, list(range(2, 10)), _stream()[11:], 11, "served whole") == [] and whole.cached == "served whole"


def test_a_video_is_checked_at_the_placeholders_the_run_computed():
    video = ImageInfo(0, "vllm:v", (56, 56), (2, 4, 4), (2, 10), 2, 2)  # 2 slices of 2×2 merged patches: 8 rows
    ids = torch.arange(PROMPT).expand(3, -1).clone()
    rec = SimpleNamespace(embeds=_stream()[FIRST:])
    slices = VideoSlices([[(2, 6), (6, 10)]])
    (summary,), checks = video_sync(None, [video], [ROWS], rec, slices, ids[:, FIRST:], ids[:, FIRST:], FIRST, {0: "served by a"})
    assert all(c.ok for c in checks) and summary.max_abs_diff == 0.0 and summary.cached == "served by a"
    (whole,), none = video_sync(None, [video], [None], SimpleNamespace(embeds=_stream()[11:]), slices, ids[:, 11:], ids[:, 11:], 11,
                                {0: "served whole"})
    assert none == [] and whole.cached == "served whole" and whole.rows is None
