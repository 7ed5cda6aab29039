"""`repl --trace` on an engine trace whose first 64 prompt positions vLLM's prefix cache served: the stage views and the
token stream say which positions were not computed in that run and who computed them, and nothing reads the computed
rows at the wrong position."""

from __future__ import annotations

import pytest

from qdebug.trace.schema import load_trace, save_trace
from qdebug.tui.app import build_app
from qdebug.tui.screens.request import RequestScreen
from qdebug.tui.widgets.offset_strip import OffsetTimeline
from qdebug.tui.widgets.stage_detail import StageDetail
from qdebug.tui.widgets.stage_list import StageList
from tests.prefix_traces import local_run, prefix_hit_trace, prefix_read, scene_image

from .conftest import SIZE, text_of, wait_for

HIT = 64


@pytest.fixture(scope="module")
def saved(demo, tmp_path_factory):
    """The engine trace of a scene sent a second time, saved as the plugin writes it; and the origin named hostile."""
    local = local_run(demo, scene_image(11))
    path = tmp_path_factory.mktemp("prefix") / "second.qdt"
    save_trace(prefix_hit_trace(demo, local, HIT, [prefix_read(HIT, "first\x1b[31m")]), path)
    return path


async def test_the_request_screen_shows_the_cached_positions_and_their_origin(saved):
    trace = load_trace(saved)
    app = build_app(trace=trace, source=str(saved))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, RequestScreen)
        assert not any(r.failed for r in screen.query_one(StageList).rows)  # what the engine computed checks out
        await pilot.press("down", "down")
        await wait_for(pilot, lambda: screen.sel.stage == "sync")
        await pilot.pause()
        detail = _flat(screen.query_one(StageDetail))
        assert "prefix cache rows of positions 64..74 only: prompt positions 0..63 were not computed in this run" in detail
        assert "computed by first\\x1b[31m" in detail  # the origin's name is data: escaped, never a terminal code
        assert "✓ image 0: merged rows equal encode rows" in detail and "first 61 served from the prefix cache" in detail
        await pilot.press("down")
        await wait_for(pilot, lambda: screen.sel.stage == "layer.0")
        await pilot.pause()
        assert "rows of positions 64..74 only" in _flat(screen.query_one(StageDetail))
        timeline = _flat(screen.query_one(OffsetTimeline))
        assert "▒" * 10 in timeline and "▒ prompt positions 0..63 were not computed in this run" in timeline
        assert "MRoPE (t,h,w) (" in timeline  # the last prompt position's ids, read at its own row (64 rows in)
        last = trace.tensor("sync.position_ids")[:, -1].tolist()
        assert str(tuple(last)) in timeline
        for _ in range(len(trace.input_ids) - HIT):  # onto position 63: served from the cache
            await pilot.press("shift+left")
        await wait_for(pilot, lambda: screen.view().pos == HIT - 1)
        await pilot.pause()
        assert "not computed in this run (served from the prefix cache)" in _flat(screen.query_one(OffsetTimeline))


def _flat(widget) -> str:
    """What a widget draws, its lines joined (a long line wraps at the panel's width)."""
    return " ".join(text_of(widget).split())
