"""Per-row tolerance: massive activations in a few channels must not hide a difference in an ordinary value."""

import copy
from dataclasses import replace

import pytest
import torch

from qdebug.analysis.diff import diff_traces
from qdebug.analysis.tolerances import tolerance_for
from qdebug.trace.request import build_request
from qdebug.trace.runner import RecordPolicy, trace_request
from tests.conftest import scene


@pytest.fixture(scope="module")
def full_trace(demo):
    s = scene(8, width=140, height=140)
    return trace_request(demo, build_request("Describe the image.", [], images=[s.image], max_new_tokens=3), RecordPolicy(keep_hidden=True))


def _as_bf16(trace):
    out = copy.copy(trace)
    out.meta = replace(trace.meta, model={**trace.meta.model, "dtype": "bfloat16"})
    out.tensors = dict(trace.tensors)
    return out


@pytest.mark.parametrize("where", ["one channel of every row", "one channel of a few rows"])
def test_massive_activation_does_not_hide_a_difference_of_one(full_trace, where):
    a, b = _as_bf16(full_trace), _as_bf16(full_trace)
    hidden = full_trace.tensors["layer.1.hidden"].clone()
    if where == "one channel of every row":
        hidden[:, 7] = 1e4
    else:
        hidden[:3, 7] = 1e4
    a.tensors["layer.1.hidden"] = hidden
    moved = hidden.clone()
    row, channel = 20, 30
    moved[row, channel] += 1.0
    b.tensors["layer.1.hidden"] = moved
    result = diff_traces(a, b)
    assert result.tolerance.rtol == 2.0**-8  # bfloat16's own rounding step
    assert result.first_divergence is not None and result.first_divergence.name == "layer.1"
    assert result.first_divergence.token_index == row and result.first_divergence.channel == channel
    kind = "image" if row in set(full_trace.image_positions()) else "text"
    assert result.first_divergence.token_kind == kind
    finding = result.findings[0]
    assert finding.kind == "first_divergence" and f"token {row} ({kind}), channel {channel}" in finding.message


def test_one_rounding_of_the_dtype_agrees():
    """Values rounded once to bfloat16 agree with the originals under bfloat16's tolerance, outliers included."""
    torch.manual_seed(0)
    a = torch.randn(64, 256)
    a[:, 5] = 3e3
    b = a.to(torch.bfloat16).float()
    tol = tolerance_for("bfloat16", "float32")
    assert (tol.excess(a, b) <= 0).all()
    b[10, 40] += 0.5
    assert (tol.excess(a, b) > 0).nonzero().tolist() == [[10, 40]]


def test_nan_parts():
    tol = tolerance_for("float32", "float32")
    a = torch.ones(2, 3)
    b = a.clone()
    b[1, 2] = float("nan")
    assert not (tol.excess(a, b) <= 0).all()


def test_diff_of_default_traces_says_what_it_could_not_compare(demo):
    """Traces saved with the default policy keep the last prompt row per layer: the diff compares that and says so."""
    s = scene(9, width=112, height=112)
    request = build_request("Describe the image.", [], images=[s.image], max_new_tokens=2)
    a, b = trace_request(demo, request), trace_request(demo, request)
    result = diff_traces(a, b)
    assert result.first_divergence is None
    layer = next(st for st in result.stages if st.name == "layer.0")
    assert layer.verdict == "ok" and layer.detail.startswith("last prompt row only")
    assert any(f.kind == "partial_comparison" and "--keep hidden" in f.message for f in result.findings)
