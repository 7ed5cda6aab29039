"""Snapshots at 140×45 of the request screen, the heatmap for a chosen layer/head/query, and the batch screen.

Regenerate after an intended change with `python -m pytest tests/tui/test_snapshots.py --snapshot-update`
and look at the SVGs in __snapshots__/ before committing them.
"""

from __future__ import annotations

from qdebug.tui.app import build_app

from .conftest import SIZE


def test_request_screen(snap_compare, trace):
    assert snap_compare(build_app(trace=trace), terminal_size=SIZE)


def test_heatmap_layer_head_and_query(snap_compare, trace):
    # layer 1, head 0, the query of step 1 ('red'), with the sync stage's offsets on the left
    keys = ["down", "down", "right_square_bracket", "right_square_bracket", "h", "right"]
    assert snap_compare(build_app(trace=trace), terminal_size=SIZE, press=keys)


def test_batch_screen(snap_compare, report):
    assert snap_compare(build_app(report=report), terminal_size=SIZE, press=["down", "down"])
