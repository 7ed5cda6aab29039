"""Panel renderers on edited traces: a desync draws two strips that don't line up; top-k at prompt positions."""

from __future__ import annotations

import copy
import io

from rich.console import Console

from qdebug.tui.state import Selection, TraceDoc, View, query_move, stage_rows
from qdebug.tui.widgets.offset_strip import timeline_renderable
from qdebug.tui.widgets.stage_detail import compare_text
from qdebug.tui.widgets.topk_panel import topk_rows


def _plain(renderable, width=130) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(renderable)
    return console.file.getvalue()


def _desynced(trace, shift: int = 2):
    broken = copy.copy(trace)
    broken.stages = copy.deepcopy(trace.stages)
    broken.stages["sync"].summary.images[0].visual_offset += shift
    return broken


def test_a_desync_draws_two_strips_that_do_not_line_up(trace):
    start, end = trace.images[0].span
    lines = _plain(timeline_renderable(View(TraceDoc(_desynced(trace))), 130)).splitlines()
    text_strip, visual_strip = lines[0], lines[1]
    prefix = 12
    assert visual_strip[prefix + start : prefix + start + 2] == "··"  # the first two placeholders got nothing
    assert set(visual_strip[prefix + start + 2 : prefix + end + 2]) == {"█"}  # the rows landed two tokens later
    assert set(text_strip[prefix + start : prefix + end]) == {"█"}
    assert "visual@5" in lines[-1] and "✗ desync" in lines[-1]
    healthy = _plain(timeline_renderable(View(TraceDoc(trace)), 130))
    assert "desync" not in healthy and f"text@{start} visual@{start}" in healthy


def test_long_sequences_get_an_overview_and_a_window_around_the_cursor(trace):
    doc = TraceDoc(trace)
    out = _plain(timeline_renderable(View(doc, Selection(pos=30)), 40), width=40)
    assert out.startswith("overview") and "pos 30" in out


def test_topk_at_a_prompt_position_comes_from_the_logits_tensors(trace):
    doc = TraceDoc(trace)
    rows, entropy, nxt, title = topk_rows(View(doc, Selection(pos=28)), 28)
    assert len(rows) == trace.tensors["logits.topk_ids"].shape[1] and entropy is not None
    assert nxt == trace.tokens[29] and "next token after pos 28" in title
    rows, _, chosen, title = topk_rows(View(doc), len(trace.input_ids) - 1)
    assert chosen == trace.steps[0].token and title.startswith("step 0")


def test_query_moves_and_stage_rows(trace):
    doc = TraceDoc(trace)
    q = trace.attn_queries
    assert query_move(doc, q[3], 1) == q[4] and query_move(doc, q[3], -1) == q[2]
    assert query_move(doc, q[-1], 1) == q[-1]
    rows = stage_rows(trace.stage_names, trace, None, {"sync", "step.*"})
    assert all(r.status == "done" for r in rows)
    assert [r.name for r in rows if r.breakpoint] == ["sync", *[n for n in trace.stage_names if n.startswith("step.")]]
    assert all(r.status == "pending" for r in stage_rows(["preprocess", "encode"], None, None, set()))


def test_replayed_against_reference_names_what_differs(report):
    replayed, reference = report.traces["c"], report.references["c"]
    out = _plain(compare_text(replayed.stages["encode"], reference.stages["encode"], "reference"))
    assert "fingerprint" in out and "≠" in out
    same = _plain(compare_text(replayed.stages["preprocess"], reference.stages["preprocess"], "reference"))
    assert "the same" in same
