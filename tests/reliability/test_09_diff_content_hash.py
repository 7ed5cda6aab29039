"""Item 9: traces of two different images of one size with one prompt are refused by diff (exit 5)."""

from __future__ import annotations

import pytest

from qdebug.analysis.diff import check_comparable
from qdebug.errors import IncompatibleTracesError
from qdebug.trace.request import build_request
from qdebug.trace.runner import RecordPolicy, trace_request
from qdebug.trace.schema import load_trace, save_trace

from ..conftest import scene
from .conftest import one_line_error, qdebug


@pytest.fixture(scope="module")
def two_traces(demo, tmp_path_factory):
    """Traces of two different 112×112 scenes with the same prompt, saved as .qdt files."""
    folder = tmp_path_factory.mktemp("hash")
    paths = []
    for name, seed, colour in (("a", 5, "red"), ("b", 6, "blue")):
        image = scene(seed, width=112, height=112, colour=colour, shape="circle", quadrant="top left").image
        trace = trace_request(demo, build_request("Describe the image.", [], images=[image], max_new_tokens=2), RecordPolicy(attn_layers=set()))
        paths.append(save_trace(trace, folder / f"{name}.qdt"))
    return paths


def test_different_pixels_same_grid_are_refused(two_traces):
    a, b = (load_trace(p) for p in two_traces)
    assert a.input_ids == b.input_ids and [i.grid_thw for i in a.images] == [i.grid_thw for i in b.images]
    assert a.request.image_sha256 != b.request.image_sha256
    proc = qdebug("diff", *two_traces)
    one_line_error(proc, "different requests", "image 0 has other pixels")
    assert proc.returncode == 5


def test_the_same_trace_twice_still_compares(two_traces):
    proc = qdebug("diff", two_traces[0], two_traces[0])
    assert proc.returncode == 0, proc.stderr


def test_traces_without_hashes_fall_back_to_ids_and_grids(two_traces):
    a, b = (load_trace(p) for p in two_traces)
    for t in (a, b):
        t.request.image_sha256 = None  # traces saved before the hash existed
    check_comparable(a, b)  # no refusal: nothing to compare the pixels by
    with pytest.raises(IncompatibleTracesError):
        check_comparable(load_trace(two_traces[0]), load_trace(two_traces[1]))
