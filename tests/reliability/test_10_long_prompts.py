"""Item 10: a prompt longer than the model's context is a warning finding naming both numbers."""

from __future__ import annotations

import json

from qdebug.trace.request import build_request
from qdebug.trace.runner import RecordPolicy, trace_request

from ..conftest import scene
from .conftest import qdebug


def test_over_long_prompt_is_a_warning_naming_both_numbers(demo):
    image = scene(8, width=56, height=56).image
    request = build_request("red circle " * 700, [], images=[image], max_new_tokens=2)
    trace = trace_request(demo, request, RecordPolicy(attn_layers=set()))
    n = len(trace.input_ids)
    assert n > 1024
    (found,) = [f for f in trace.findings if f.kind == "prompt_too_long"]
    assert found.severity == "warning"
    assert f"{n} prompt tokens" in found.message and "1024" in found.message


def test_prompt_within_context_has_no_finding(demo_trace):
    trace, _ = demo_trace
    assert not [f for f in trace.findings if f.kind == "prompt_too_long"]


def test_cli_reports_it(red_png):
    proc = qdebug("attn", red_png, "red circle " * 600, "--device", "cpu", "--max-new-tokens", "2", "--json", "-")
    assert proc.returncode == 0, proc.stderr
    kinds = [f["kind"] for f in json.loads(proc.stdout)["findings"]]
    assert "prompt_too_long" in kinds
