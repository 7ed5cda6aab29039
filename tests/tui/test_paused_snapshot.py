"""Snapshot of a live run paused at preprocess (demo model): one state, told the same in header, panel and list,
and the panel showing what preprocess captured. Regenerate with --snapshot-update and look at the SVG first."""

from __future__ import annotations

from qdebug.tui.app import build_app

from .conftest import ROOT, SIZE, wait_for


def test_paused_at_preprocess(snap_compare, demo):
    app = build_app(loaded=demo, image_paths=[ROOT / "sample_data" / "blue_square_bottom_right.png"], prompt="Describe the image.",
                    max_new_tokens=4)

    async def paused(pilot):
        screen = app.screen
        await wait_for(pilot, lambda: screen.runs.session is not None and screen.runs.session.stepper.paused_at == "preprocess"
                       and screen.doc is not None, what="paused at preprocess with its snapshot")
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=paused)
