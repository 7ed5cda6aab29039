"""Issue 36: every finding a trace holds is visible in the request screen at the stage it names, and marks that stage
in the stage list (an engine trace of a head-first kernel holds a `layout` error at `layer.2` while every check of
the stage passes: the list showed ✓ and the panel "no NaN/Inf", the finding nowhere)."""

from __future__ import annotations

import copy

from qdebug.findings import Finding
from qdebug.tui.app import build_app
from qdebug.tui.widgets.stage_detail import StageDetail
from qdebug.tui.widgets.stage_list import StageList
from qdebug.vocab import FindingKind, Severity, layer_stage

from .conftest import SIZE, text_of, wait_for

LAYOUT_MESSAGE = "layer 2 (softmax attention kernel): q arrived as [B,H,T,D] where [B,T,H,D] was expected"


def _with_findings(trace):
    """The saved demo trace holding what an engine trace of head-first:2 holds, plus a warning that names no stage."""
    marked = copy.copy(trace)
    marked.findings = [
        Finding(FindingKind.LAYOUT, Severity.ERROR, LAYOUT_MESSAGE, stage=layer_stage(2), layer=2),
        Finding(FindingKind.NONDETERMINISM, Severity.WARNING, "two runs of the same batch differ", stage=None),
    ]
    return marked


async def test_an_error_finding_marks_its_stage_and_is_shown_in_its_detail(trace):
    marked = _with_findings(trace)
    assert all(s.ok for s in marked.stages.values())  # every check passes: only the finding says something is wrong
    app = build_app(trace=marked)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        rows = {r.name: r for r in app.screen.query_one(StageList).rows}
        assert rows["layer.2"].failed
        assert not rows["layer.1"].failed and not rows["layer.3"].failed
        await pilot.press(*["down"] * marked.stage_names.index("layer.2"))
        await wait_for(pilot, lambda: app.screen.sel.stage == "layer.2")
        detail = " ".join(text_of(app.screen.query_one(StageDetail)).split())  # the panel wraps long lines
        assert "[error] layout:" in detail and LAYOUT_MESSAGE in detail


async def test_a_finding_naming_no_stage_is_shown_at_the_first_stage(trace):
    app = build_app(trace=_with_findings(trace))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        rows = {r.name: r for r in app.screen.query_one(StageList).rows}
        assert rows["preprocess"].warned and not rows["preprocess"].failed
        detail = text_of(app.screen.query_one(StageDetail))
        assert "two runs of the same batch differ" in detail


async def test_a_trace_without_findings_shows_no_marks(trace):
    app = build_app(trace=trace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert not any(r.failed or r.warned for r in app.screen.query_one(StageList).rows)
