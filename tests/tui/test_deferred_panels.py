"""The request screen's first frame holds the stage list, the stage panel and the bars; top-k, offsets, the heatmap
and the footer are mounted right after it (the app's Ready). Keys pressed before they are there are not lost: the
panels show the selection those keys made."""

from __future__ import annotations

from qdebug.tui.app import build_app
from qdebug.tui.screens.request import RequestScreen

from .conftest import SIZE

KEYS = ("down", "down", "right", "right_square_bracket")


async def _selection_after_keys_pressed_late(trace):
    """The selection the same keys make once everything is on screen."""
    app = build_app(trace=trace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press(*KEYS)
        await pilot.pause()
        return app.screen.sel


async def test_the_first_frame_comes_before_the_secondary_panels_and_keys_meanwhile_act(trace):
    app = build_app(trace=trace)
    seen: dict[str, object] = {}
    first_frame_shown = RequestScreen.first_frame_shown

    def at_first_frame(screen: RequestScreen) -> None:  # what the first frame held, then keys typed at once
        seen["panels"] = [bool(screen.query(f"#{name}")) for name in ("stages", "detail", "topk", "timeline", "attention")]
        seen["focused"] = screen.focused.id if screen.focused else None  # the keys go to the stage list from the start
        for key in KEYS:
            app.simulate_key(key)
        first_frame_shown(screen)

    RequestScreen.first_frame_shown = at_first_frame  # type: ignore[method-assign]
    try:
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            await pilot.pause()
            screen = app.screen
            assert seen["panels"] == [True, True, False, False, False]
            assert seen["focused"] == "stages"
            early = screen.sel
            assert early.stage == screen.doc.trace.stage_names[2] and early.layer == 0, early
            view = screen.view()
            for name in ("topk", "timeline", "attention"):
                panel = screen.query_one(f"#{name}")
                assert panel.view == view, name  # each panel mounted late shows the selection the early keys made
            assert screen.query_one("#attention").border_title == "attention"
    finally:
        RequestScreen.first_frame_shown = first_frame_shown  # type: ignore[method-assign]
    assert early == await _selection_after_keys_pressed_late(trace)


async def test_a_replay_status_asked_for_before_the_panels_mount_is_shown_then_hidden(trace):
    """The replay bar is mounted with the panels (it is hidden until a replay runs); a replay that reports before
    they mount still gets its bar, in its place above the message line."""
    app = build_app(trace=trace)
    first_frame_shown = RequestScreen.first_frame_shown
    RequestScreen.first_frame_shown = lambda screen: None  # type: ignore[method-assign]  # the panels never mount
    try:
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            screen = app.screen
            assert not screen.query("#replay-status") and not screen.query("#topk")
            screen.panels.show_replay_status("references 1/3", 1, 3)
            await pilot.pause()
            await pilot.pause()
            status = screen.query_one("#replay-status")
            assert status.display and status.line == "references 1/3" and status.lines == ["references 1/3"]
            order = [w.id for w in screen.children]
            assert order.index("replay-status") == order.index("message") - 1, order
            screen.panels.hide_replay_status()
            assert not status.display
    finally:
        RequestScreen.first_frame_shown = first_frame_shown  # type: ignore[method-assign]


async def test_the_objects_made_by_the_imports_are_frozen_once_the_app_is_built(trace):
    """Full collections skip what the imports made (a collection in the first frame cost ~15 ms of it)."""
    import gc

    build_app(trace=trace)
    assert gc.get_freeze_count() > 0


def test_importing_the_app_collects_nothing_on_the_way_and_leaves_collection_as_it_found_it():
    """The imports run with collection off (their dozens of collections freed nothing: ~8 ms of a first frame) and
    end frozen; collection is back on after them, or still off if the caller had turned it off."""
    import subprocess
    import sys

    probe = ("import gc, sys; was = sys.argv[1] == 'on'; gc.enable() if was else gc.disable(); "
             "seen = []; gc.callbacks.append(lambda phase, info: seen.append(phase)); "
             "import qdebug.tui.app; assert 'textual' in sys.modules; "
             "print(gc.isenabled() == was, gc.get_freeze_count() > 0, seen.count('start'))")
    for state in ("on", "off"):
        out = subprocess.run([sys.executable, "-c", probe, state], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        restored, frozen, collections = out.stdout.split()
        assert restored == "True" and frozen == "True", (state, out.stdout)
        assert int(collections) <= 5, (state, out.stdout)  # Python's own start and qdebug's package imports at most
