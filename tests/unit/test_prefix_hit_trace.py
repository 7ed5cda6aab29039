"""A traced request whose first prompt positions vLLM's prefix cache served: the tracer records it from where the cache
stopped, its trace holds the rows of the positions it computed and says which were served and by whom, and every
comparison with another run (the local model, the engine alone, a burst) uses the positions both computed only.
The engine traces here are assembled by the plugin's own code from qdebug's demo run of the request (tests/prefix_traces)."""

from __future__ import annotations

import pytest
import torch

from qdebug.analysis.diff import diff_traces
from qdebug.analysis.engine_compare import parting
from qdebug.analysis.engine_evidence import engine_rows
from qdebug.engine.requests import EngineRequest, RowGap, rows_of_step
from qdebug.errors import TraceFormatError
from qdebug.replay.engine import landed_rows
from qdebug.trace.cached import cached_prefix, computed_from
from qdebug.trace.items import trace_items
from qdebug.trace.schema import load_trace, save_trace
from qdebug.trace.tensor_names import TensorKind as T
from qdebug.vocab import CacheReuse, FindingKind, StageVerdict
from tests.prefix_traces import local_run, prefix_hit_trace, prefix_read, scene_image

HIT = 64  # two KV blocks of 32: the image's placeholders are positions 3..66 of a 75-position prompt


@pytest.fixture(scope="module")
def runs(demo):
    """The demo's own runs of two requests: one scene, and another scene of the same size (another image's content)."""
    return local_run(demo, scene_image(11)), local_run(demo, scene_image(12, "blue"))


@pytest.fixture(scope="module")
def second(demo, runs):
    """The engine trace of the first scene sent again: positions 0..63 served from the prefix cache, computed by `first`."""
    return prefix_hit_trace(demo, runs[0], HIT, [prefix_read(HIT, "first")])


def test_the_tracer_records_a_request_from_where_the_prefix_cache_stopped():
    req = EngineRequest("r", "r", list(range(75)), [], 8, cached_prefix=HIT)
    (first,) = rows_of_step(["x", "r"], [0, 5, 5 + 6], {"r": req}, {"r": HIT})  # a chunk of 6 rows from position 64
    assert (first.start, first.end, first.offset, first.prefill, first.logits_row) == (5, 11, HIT, True, None)
    assert req.computed_from == req.prompt_rows == HIT
    req.prompt_rows = HIT + 6
    (last,) = rows_of_step(["r"], [0, 5], {"r": req}, {"r": HIT + 6})  # and continues where it stopped
    assert last.offset == HIT + 6 and last.logits_row == 0
    with pytest.raises(RowGap, match="starts at prompt position 32, but the engine served 64 positions"):
        rows_of_step(["s"], [0, 5], {"s": EngineRequest("s", "s", list(range(75)), [], 8, cached_prefix=HIT)}, {"s": 32})


def test_a_prefix_hit_trace_holds_the_computed_rows_and_says_who_served_the_rest(second, runs, tmp_path):
    prompt = len(second.input_ids)
    cached = cached_prefix(second)
    assert cached is not None and (cached.end, cached.origins, cached.caches, cached.reuse) == (HIT, ("first",), ("prefix_cache",), "same_content")
    assert cached.said.startswith("prompt positions 0..63 were not computed in this run: the prefix cache served positions 0..63, computed by first")
    assert second.meta.engine["cache_reads"][0]["origin_name"] == "first"
    for n in range(second.num_layers):
        assert second.tensor(T.LAYER_HIDDEN, layer=n).shape[0] == prompt - HIT
    assert second.tensor(T.SYNC_POSITION_IDS).shape == (3, prompt - HIT)
    assert not second.findings and all(stage.ok for stage in second.stages.values())  # what it computed checks out
    (image,) = second.stages["sync"].summary.images
    assert (image.text_offset, image.visual_offset, image.rows, image.max_abs_diff) == (3, 3, 64, 0.0)
    assert image.cached.startswith("its first 61 of 64 placeholders (positions 3..63) served from the prefix cache, computed by first")
    (item,) = trace_items(second)
    assert item.cached == 61 and not item.wholly_cached
    path = save_trace(second, tmp_path / "second.qdt")
    assert cached_prefix(load_trace(path)) == cached and computed_from(load_trace(path)) == HIT


def test_the_local_comparison_uses_only_the_positions_the_engine_computed(second, runs):
    local, _ = runs
    result = diff_traces(local, second)
    assert result.first_divergence is None and {s.verdict for s in result.stages} == {StageVerdict.OK}
    assert result.compared_from == HIT and result.to_json()["compared_from"] == HIT
    (said,) = [f for f in result.findings if f.kind == FindingKind.PARTIAL_COMPARISON]
    assert said.message.startswith("compared at prompt positions 64..74 only, the positions both runs computed (B: prompt positions 0..63")
    assert parting(local, second).stage is None
    # one row the engine computed, moved: found at its own position
    moved = second.tensor(T.LAYER_HIDDEN, layer=1).clone()
    moved[70 - HIT] += 1.0
    broken = type(second)(**{**second.__dict__, "tensors": {**second.tensors, "layer.1.hidden": moved}})
    apart = diff_traces(local, broken).first_divergence
    assert apart is not None and (apart.name, apart.token_index) == ("layer.1", 70)


def test_a_run_fed_another_images_kv_parts_at_its_computed_positions_only(demo, runs):
    local, other = runs
    fed = prefix_hit_trace(demo, local, HIT, [prefix_read(HIT, "a", CacheReuse.OTHER, "positions 0..63 hold image item 0 ...")],
                           rows_from=other, encode=other.tensor(T.ENCODE, item=0))
    assert cached_prefix(fed).reuse == "other_content" and "computed by a (other content): positions 0..63 hold" in cached_prefix(fed).said
    result = diff_traces(local, fed)
    named = [p for s in result.stages for p in [s.token_index, *(t["index"] for t in s.top_tokens)] if p is not None]
    assert result.first_divergence is not None and result.first_divergence.name == "encode"
    assert result.first_divergence.token_index == HIT and named and min(named) >= HIT, result.to_json()["stages"]


def test_an_image_the_prefix_cache_served_whole_is_said_not_failed(demo, runs):
    local, _ = runs
    whole = prefix_hit_trace(demo, local, 70, [prefix_read(70, "first")])
    assert not whole.findings and all(stage.ok for stage in whole.stages.values())
    assert not whole.has_tensor(T.ENCODE, item=0)
    (encoded,) = whole.stages["encode"].summary.images
    (synced,) = whole.stages["sync"].summary.images
    assert encoded.cached == synced.cached == "served whole from the prefix cache (positions 3..66), computed by first (same content)"
    assert synced.visual_offset is None and trace_items(whole)[0].wholly_cached
    result = diff_traces(local, whole)
    assert result.first_divergence is None and result.compared_from == 70
    encode = next(s for s in result.stages if s.name == "encode")
    assert encode.verdict == StageVerdict.MISSING and "served whole from a prefix cache" in encode.detail
    assert any("media items 0 served whole from it were not compared at encode" in f.message for f in result.findings)
    assert landed_rows(whole) is None  # no row of the image landed in this run


def test_whose_rows_landed_is_judged_at_the_computed_placeholders(demo, runs, second):
    local, other = runs
    assert landed_rows(second).shape[0] == 3 and torch.equal(landed_rows(second), local.tensor(T.ENCODE, item=0)[61:])
    rows = engine_rows({"first": local, "second": second})
    assert rows["second"] == (None, {"own": 3}) and rows["first"] == (None, {"own": 64})
    # a run whose computed placeholders hold another request's rows (a cache fed it that request's encoding)
    fed = prefix_hit_trace(demo, local, HIT, [prefix_read(HIT, "b")])
    embeds = fed.tensor(T.SYNC_EMBEDS).clone()
    embeds[0:3] = other.tensor(T.ENCODE, item=0)[61:]  # positions 64..66: the other image's last rows
    fed = type(fed)(**{**fed.__dict__, "tensors": {**fed.tensors, "sync.embeds": embeds}})
    donor, owners = engine_rows({"mine": fed, "b": other})["mine"]
    assert donor == "b" and owners == {"b": 3}


def test_a_hostile_cached_prefix_is_refused_on_reading(second, tmp_path):
    import json
    import zipfile

    path = save_trace(second, tmp_path / "t.qdt")
    with zipfile.ZipFile(path) as zf:
        doc, blob = json.loads(zf.read("trace.json")), zf.read("tensors.safetensors")
    doc["meta"]["engine"]["cached_prefix"]["positions"] = [0, 10_000]
    bad = tmp_path / "bad.qdt"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("trace.json", json.dumps(doc))
        zf.writestr("tensors.safetensors", blob)
    with pytest.raises(TraceFormatError, match=r"meta.engine.cached_prefix.positions: expected \[0, N\] with 0 < N < 75"):
        load_trace(bad)
