"""Qwen3-VL deepstack: recorded per layer (added?, level, rows, relative norm) and checked by the detector."""

from contextlib import contextmanager
from pathlib import Path

from qdebug.analysis.detectors.deepstack import deepstack_findings
from qdebug.commands.diff import DiffArgs, run_diff
from qdebug.trace.request import build_request
from qdebug.trace.runner import trace_request
from tests.conftest import scene

IMAGE = str(Path(__file__).resolve().parents[2] / "sample_data" / "red_circle_top_left.png")


def _request():
    return build_request("Describe the image.", [], images=[scene(3, width=112, height=168).image], max_new_tokens=2)


@contextmanager
def _decoder_kwargs(loaded, change):
    """A fault for the test: rewrite the decoder's deepstack inputs before the model uses them."""
    lm = loaded.adapter.language_model(loaded.model)
    handle = lm.register_forward_pre_hook(lambda m, a, kw: (a, change(dict(kw))), with_kwargs=True, prepend=True)
    try:
        yield
    finally:
        handle.remove()


def test_records_levels_rows_and_norms_on_the_image_span(family_model):
    loaded = family_model("qwen3_vl")
    trace = trace_request(loaded, _request())
    start, end = trace.images[0].span
    layers = {r["layer"]: r for r in trace.meta.deepstack["layers"]}
    assert trace.meta.deepstack["levels"] == [0, 1]
    for layer, level in ((0, 0), (1, 1)):
        r = layers[layer]
        assert r["added"] and r["rows"] == list(range(start, end)) and r["level"] == level and r["match"] > 0.999
        assert r["relative_norm"] > 0
        assert trace.stages[f"layer.{layer}"].summary.deepstack["level"] == level
    assert not layers[2]["added"]
    assert deepstack_findings(trace) == []


def test_rows_outside_the_span_and_wrong_levels_are_flagged(family_model):
    loaded = family_model("qwen3_vl")

    def shift(kw):
        if kw.get("visual_pos_masks") is not None:  # prefill only: decode steps carry no visual rows
            kw["visual_pos_masks"] = kw["visual_pos_masks"].roll(3, dims=-1)
        return kw

    with _decoder_kwargs(loaded, shift):
        trace = trace_request(loaded, _request())
    outside = [f for f in deepstack_findings(trace) if "outside the image placeholder spans" in f.message]
    assert {f.layer for f in outside} == {0, 1} and "3 position(s)" in outside[0].message

    def swap(kw):
        if kw.get("deepstack_visual_embeds") is not None:
            kw["deepstack_visual_embeds"] = list(reversed(kw["deepstack_visual_embeds"]))
        return kw

    with _decoder_kwargs(loaded, swap):
        trace = trace_request(loaded, _request())
    wrong = [f.message for f in deepstack_findings(trace)]
    assert "layer.0 got vision level 1, expected level 0" in wrong and "layer.1 got vision level 0, expected level 1" in wrong


def test_embeds_path_finding_says_why_paths_part_at_layer_1(family_dir):
    ((_, result, _, _),) = run_diff(DiffArgs(IMAGE, "Describe the image.", vary="paths", model=str(family_dir("qwen3_vl")),
                                             device="cpu", max_new_tokens=2)).comparisons
    assert result.first_divergence.name == "layer.1"
    (finding,) = [f for f in result.findings if f.kind == "deepstack"]
    assert finding.message.startswith("B: deepstack features missing after layer.0, layer.1")
    assert "inputs_embeds path drops them" in finding.message and "parts at layer.1" in finding.message
