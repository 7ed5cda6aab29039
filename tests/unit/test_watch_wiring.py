"""The watch's checks wired into a model runner, without vLLM: a miniature runner (tests/engine_fakes.py) lays out each
step as vLLM's does, a fault is planted where vLLM's would be (by the plugin's own planters where a preset exists), and
each check must fire naming the request, its donor and the requests that shared its step, as the findings log and the
counters say them, and stay silent on a clean step. What each finding says is held against the tensors themselves
(the merged rows against the encoder cache, the positions fed against the model's own rope index, the batch log)."""

from __future__ import annotations

import torch
import pytest

from qdebug.engine.batch_log import read_batch_log
from qdebug.engine.watch_log import read_findings
from qdebug.engine.watch_metrics import read_counters
from qdebug.vocab import WATCH_CHECKS, WatchCheck

from tests.engine_fakes import (IMAGE_TOKEN, FakeRunner, copy_logits, drop_placeholder, image, misplace, nan_logits, request,
                                serve, video)

# Each check's firing test below; a check added to vocab.WATCH_CHECKS fails test_every_check_has_a_firing_test until
# its firing test is listed here (the cache check is also tested against the engine core's ledger in test_watch_cache.py).
FIRES = {WatchCheck.PLACEMENT: "test_placement_names_the_donor_whose_rows_landed",
         WatchCheck.COUNTS: "test_counts_fire_when_the_prompts_placeholders_are_fewer_than_the_encoder_rows",
         WatchCheck.POSITIONS: "test_positions_fire_on_flattened_temporal_ids_naming_the_video_request",
         WatchCheck.ENCODER_BATCH: "test_encoder_batch_fires_naming_the_calls_partners_from_the_batch_log",
         WatchCheck.LAYOUT: "test_layout_fires_naming_the_head_first_layer",
         WatchCheck.LOGITS: "test_logits_fire_on_a_copied_row_naming_its_source",
         WatchCheck.CACHE: "test_cache_fires_when_the_encoder_cache_serves_another_images_rows_naming_the_donor"}


def _findings(watcher) -> list:
    watcher.findings.drain()
    return read_findings(watcher.settings.folder)


def _counters(watcher) -> dict:
    watcher.counters.flush()
    return read_counters(watcher.settings.folder, watcher.settings.run)


def _three_images(runner: FakeRunner) -> None:
    for rid in ("a", "b", "c"):
        runner.add(request(rid, [image(f"img-{rid}")]))


def _landed(runner: FakeRunner, rid: str, item: int = 0) -> torch.Tensor:
    """The rows the decoder received at a request's item's placeholders in the latest step (its whole prompt)."""
    start = list(runner.input_batch.req_ids).index(rid)
    row0 = int(runner.query_start_loc.np[start])
    pos = runner.requests[rid].mm_features[item].mm_position
    return runner.merged[row0 + pos.offset:row0 + pos.offset + pos.length]


def _owners(runner: FakeRunner, rid: str) -> set[str]:
    """Whose encoder rows (bit for bit) the request's placeholder rows are, read from the tensors."""
    cache = {r: runner.encoder_cache[s.mm_features[0].identifier] for r, s in runner.requests.items()}
    return {owner for row in _landed(runner, rid) for owner, rows in cache.items() if any(torch.equal(row, x) for x in rows)}


def test_every_check_has_a_firing_test():
    assert set(FIRES) == set(WATCH_CHECKS)
    assert all(name in globals() for name in FIRES.values())


def test_a_clean_step_runs_every_check_and_none_fires(tmp_path):
    runner = FakeRunner()
    watcher = serve(runner, tmp_path, sample=1.0)
    _three_images(runner)
    runner.add(request("d", [video("vid-d")]))
    runner.step({"a": None, "b": None, "c": None, "d": 9})  # d's prompt in two chunks
    runner.step({"a": 1, "b": 1, "c": 1, "d": None})
    runner.add(request("e", [image("img-a")]))  # a's image again: its rows legitimately from the encoder cache
    runner.step({"a": 1, "b": 1, "c": 1, "d": 1, "e": None})
    counters = _counters(watcher)
    ran = {c for c, n in counters["checks"].items() if n}
    assert ran >= set(FIRES), counters["checks"]  # every check ran on these steps...
    assert not any(counters["violations"].values()) and not any(counters["errors"].values()), counters
    assert _findings(watcher) == []  # ...and found nothing
    assert counters["checks"]["counts"] == 5  # each item's counts once, whatever steps its rows took (e's too)
    assert counters["checks"]["encoder_batch"] == 1  # the one encoder call of >= 2 items (a, b, c's images)
    assert counters["checks"]["cache"] == 1  # e's read of a's encoding


def test_the_watch_changes_no_tensor_the_engine_uses(tmp_path):
    """Every check on every step, against the same runner unwatched: the logits of every step are bit for bit equal."""
    def run(watched: bool) -> list[torch.Tensor]:
        runner = FakeRunner(seed=3)
        if watched:
            serve(runner, tmp_path / "w", sample=1.0)
        _three_images(runner)
        return [runner.step({"a": None, "b": None, "c": 6}), runner.step({"a": 1, "b": 1, "c": None})]

    assert all(torch.equal(x, y) for x, y in zip(run(False), run(True)))


def test_placement_names_the_donor_whose_rows_landed(tmp_path):
    runner = FakeRunner()
    misplace(runner, victim="b", donor="a")
    watcher = serve(runner, tmp_path)
    _three_images(runner)
    runner.step({"a": None, "b": None, "c": None})
    assert _owners(runner, "b") == {"a"} and _owners(runner, "a") == {"a"}  # what the merge did, read from the rows
    [found] = _findings(watcher)
    assert (found.check, found.outcome, found.stage, found.request_id) == ("placement", "violation", "sync", "b")
    assert found.donors == ["a"] and found.cobatched == ["a", "c"], found
    assert "item 0 (image): 4 of 4 rows at its placeholders (prompt positions 3..6) are not its own encoder rows: 4 from a" in found.evidence
    counters = _counters(watcher)
    assert counters["violations"]["placement"] == 1 and counters["checks"]["placement"] == 3, counters


def test_placement_attributes_a_mix_and_a_shifted_copy(tmp_path):
    """Half of b's rows are c's, and a's rows land in reverse order: donors and shifted rows are each counted."""
    runner = FakeRunner()
    merge = runner.model.embed_input_ids

    def mixed(input_ids, multimodal_embeddings=None, **kwargs):
        a, b, c = (x.clone() for x in multimodal_embeddings)
        b[:2] = c[:2]
        return merge(input_ids, [a.flip(0), b, c], **kwargs)

    runner.model.embed_input_ids = mixed
    watcher = serve(runner, tmp_path)
    _three_images(runner)
    runner.step({"a": None, "b": None, "c": None})
    found = {f.request_id: f for f in _findings(watcher)}
    assert set(found) == {"a", "b"}
    assert found["b"].donors == ["c"] and "2 of 4 rows" in found["b"].evidence and "2 from c" in found["b"].evidence
    assert found["a"].donors == [] and "4 its own from other positions" in found["a"].evidence, found["a"].evidence


def test_placement_under_the_plugins_shared_visual_buffer_names_what_the_rows_show(tmp_path, monkeypatch):
    """The plugin's own seed-000 fault, planted in the fake: every request whose placeholder rows are not its own is
    found, each naming the donors the rows themselves show; the others are not."""
    monkeypatch.setenv("QDEBUG_VLLM_SEED", "0")
    runner = FakeRunner()
    watcher = serve(runner, tmp_path, fault="shared-visual-buffer")
    expected: dict[str, set[str]] = {}
    done: tuple[str, ...] = ()
    for k in range(4):  # four steps of four new requests each (the previous step's finished)
        ids = [f"s{k}-{i}" for i in range(4)]
        for rid in ids:
            runner.add(request(rid, [image(f"img-{rid}")]))
        runner.step(dict.fromkeys(ids), finished=done)
        for rid in ids:
            owners = _owners(runner, rid)
            if owners != {rid}:
                expected[rid] = owners - {rid}
        done = tuple(ids)
    assert expected, "the seed contaminated no request: this test would test nothing"
    found = {f.request_id: set(f.donors) for f in _findings(watcher) if f.check == "placement"}
    assert found == expected


def test_counts_fire_when_the_prompts_placeholders_are_fewer_than_the_encoder_rows(tmp_path):
    runner = FakeRunner()
    watcher = serve(runner, tmp_path)
    _three_images(runner)
    drop_placeholder(runner.waiting["b"])
    runner.step({"a": None, "b": 5, "c": None})
    runner.step({"a": 1, "b": None, "c": 1})  # b's item again: counts are checked once per item
    [found] = _findings(watcher)
    assert (found.check, found.outcome, found.stage, found.request_id) == ("counts", "violation", "preprocess", "b")
    assert found.evidence == "item 0 (image): placeholder tokens 3, encoder rows 4, grid t·h·w/merge² 4 (grid (1, 4, 4))"
    assert found.donors == [] and found.cobatched == []
    counters = _counters(watcher)
    assert counters["checks"]["counts"] == 3 and counters["violations"]["counts"] == 1, counters


def test_counts_fire_under_the_plugins_placeholder_shift_and_nothing_else_does(tmp_path):
    """placeholder-shift:1 (the ranges one token past the prompt's placeholder tokens): every item's counts disagree;
    the merge and the rope index follow the shifted ranges, so placement and positions stay silent."""
    runner = FakeRunner()
    watcher = serve(runner, tmp_path, fault="placeholder-shift:1", sample=1.0)
    _three_images(runner)
    runner.step({"a": None, "b": None, "c": None})
    state = runner.requests["a"]
    span = state.mm_features[0].mm_position
    assert span.offset == 4 and state.prompt_token_ids[3:7] == [IMAGE_TOKEN] * 4  # the tokens stayed, the range moved
    found = _findings(watcher)
    assert sorted((f.check, f.request_id) for f in found) == [("counts", "a"), ("counts", "b"), ("counts", "c")], found
    assert {f.evidence for f in found} == {"item 0 (image): placeholder tokens 3, encoder rows 4, grid t·h·w/merge² 4 (grid (1, 4, 4))"}


def test_positions_fire_on_flattened_temporal_ids_naming_the_video_request(tmp_path):
    """The plugin's temporal-ids-flat preset (the runner keeps every video row at its first frame's time)."""
    runner = FakeRunner()
    watcher = serve(runner, tmp_path, fault="temporal-ids-flat", sample=1.0)
    runner.add(request("a", [image("img-a")]))
    runner.add(request("v", [video("vid-v", grid=(2, 4, 4))]))  # two temporal slices of 4 rows
    runner.step({"a": None, "v": None})
    state = runner.requests["v"]
    own, _ = runner.model.get_mrope_input_positions(state.prompt_token_ids, state.mm_features)
    start = int(runner.query_start_loc.np[1])
    fed = runner.mrope_positions.gpu[:, start:start + len(state.prompt_token_ids)]
    wrong = (fed != own).any(dim=0).nonzero().flatten().tolist()
    assert wrong == [7, 8, 9, 10]  # the second slice's rows, read from the ids fed
    found = [f for f in _findings(watcher) if f.check == "positions"]
    assert [(f.request_id, f.stage, f.cobatched) for f in found] == [("v", "sync", ["a"])], found
    assert found[0].evidence.startswith(f"4 of {len(state.prompt_token_ids)} rows fed this step carry other MRoPE ids")
    assert "first at prompt position 7: [3, 3, 3] where [4, 3, 3]" in found[0].evidence, found[0].evidence
    runner.step({"a": 1, "v": 1})  # decode rows: the delta is the model's, so they agree
    assert len([f for f in _findings(watcher) if f.check == "positions"]) == 1


def test_encoder_batch_fires_naming_the_calls_partners_from_the_batch_log(tmp_path):
    """The plugin's batch-dependent-encoder preset: an item re-encoded alone differs from its batched rows; the
    finding's co-batched requests are those the batch log records in that call."""
    runner = FakeRunner()
    watcher = serve(runner, tmp_path, fault="batch-dependent-encoder", sample=1.0)
    _three_images(runner)
    runner.add(request("d", [image("img-d")]))
    runner.step({"a": None, "b": None, "c": None})
    runner.step({"a": 1, "b": 1, "c": 1, "d": None})  # d's item encoded alone: nothing to check
    [found] = [f for f in _findings(watcher) if f.check == "encoder_batch"]
    [call] = [c for c in read_batch_log(tmp_path / "traces").encoder_calls if len(c.items) > 1]
    assert found.outcome == "violation" and found.stage == "encode" and call.carries(found.request_id)
    assert set(found.cobatched) == set(call.names) - {found.request_id} and len(found.cobatched) == 2, (found, call)
    assert all(f"{r} item 0" in found.evidence for r in found.cobatched) and "encoded alone" in found.evidence
    counters = _counters(watcher)
    assert counters["checks"]["encoder_batch"] == 1 == counters["violations"]["encoder_batch"], counters


def test_layout_fires_naming_the_head_first_layer(tmp_path):
    """The plugin's head-first:1 preset: layer 1's kernel receives its value rows head-first; the others do not."""
    runner = FakeRunner()
    watcher = serve(runner, tmp_path, fault="head-first:1", sample=1.0)
    _three_images(runner)
    runner.step({"a": None, "b": None, "c": None})
    found = [f for f in _findings(watcher) if f.check == "layout"]
    assert [(f.stage, f.request_id, f.cobatched) for f in found] == [("layer.1", "a", ["b", "c"])], found
    assert "layer 1's attention kernel received its value rows head-first" in found[0].evidence
    assert f"{3 * 10} rows of a step of 3 request(s)" in found[0].evidence
    counters = _counters(watcher)
    assert counters["checks"]["layout"] == 3 and counters["violations"]["layout"] == 1, counters


def test_logits_fire_on_a_copied_row_naming_its_source(tmp_path):
    runner = FakeRunner()
    copy_logits(runner, into=2, source=0)
    watcher = serve(runner, tmp_path, sample=1.0)
    _three_images(runner)
    runner.step({"a": None, "b": None, "c": None})
    found = [f for f in _findings(watcher) if f.check == "logits"]
    assert [(f.request_id, f.donors, f.cobatched, f.stage) for f in found] == [("c", ["a"], ["a"], "logits")], found
    assert "request c's logits row is an exact copy of request a's, whose inputs differ" in found[0].evidence


def test_logits_fire_on_nan_and_when_a_request_was_fed_anothers_rows(tmp_path):
    """A NaN row names its request; a request whose placeholders took another's rows (the same text otherwise) samples
    from a copy of that request's logits row: placement and logits both name the donor."""
    runner = FakeRunner()
    nan_logits(runner, row=1)
    misplace(runner, victim="c", donor="a")
    watcher = serve(runner, tmp_path, sample=1.0)
    _three_images(runner)
    runner.step({"a": None, "b": None, "c": None})
    found = {(f.check, f.request_id): f for f in _findings(watcher)}
    assert set(found) == {("logits", "b"), ("logits", "c"), ("placement", "c")}, sorted(found)
    assert "holds 1 NaN/Inf value(s)" in found["logits", "b"].evidence and found["logits", "b"].cobatched == ["a", "c"]
    assert found["logits", "c"].donors == ["a"] == found["placement", "c"].donors


def test_logits_stay_silent_when_two_requests_are_the_same(tmp_path):
    """Two requests of one prompt and one image (one encoder-cache entry) sample from equal rows: not a copy."""
    runner = FakeRunner()
    watcher = serve(runner, tmp_path, sample=1.0)
    runner.add(request("a", [image("same")]))
    runner.add(request("b", [image("same")]))
    logits = runner.step({"a": None, "b": None})
    assert torch.equal(logits[0], logits[1])
    assert _findings(watcher) == [] and _counters(watcher)["checks"]["logits"] == 1


@pytest.mark.parametrize("check", sorted(FIRES))
def test_a_check_that_raises_is_counted_and_the_step_goes_on(tmp_path, check):
    """QDEBUG_VLLM_WATCH_RAISE for each check: every run of it is an error finding, counted; the logits are those of
    the unwatched runner. The second step brings a's image again (e), read from the encoder cache: the cache check runs."""
    def run(runner: FakeRunner) -> list[torch.Tensor]:
        _three_images(runner)
        first = runner.step({"a": None, "b": None, "c": None})
        runner.add(request("e", [image("img-a")]))
        return [first, runner.step({"a": 1, "b": 1, "c": 1, "e": None})]

    expected = run(FakeRunner())
    runner = FakeRunner()
    watcher = serve(runner, tmp_path, sample=1.0, raising=frozenset({check}))
    assert all(torch.equal(x, y) for x, y in zip(run(runner), expected))
    counters = _counters(watcher)
    assert counters["errors"][check] == counters["checks"][check] > 0, counters
    found = _findings(watcher)
    assert found and {(f.check, f.outcome) for f in found} == {(check, "error")}
    assert all(f"QDEBUG_VLLM_WATCH_RAISE names {check}" in f.evidence for f in found)


def _encoded(runner: FakeRunner, rid: str, item: int = 0) -> torch.Tensor:
    """What a request's item encodes to from its own patch rows (the model's encoder, called here)."""
    pixels, grid = runner.requests[rid].mm_features[item].inputs()
    return runner.model.embed_multimodal(pixel_values=pixels, image_grid_thw=grid.unsqueeze(0))[0]


def test_cache_fires_when_the_encoder_cache_serves_another_images_rows_naming_the_donor(tmp_path):
    """Two different images under one encoder-cache key (a key that is not their content: here, their size): the
    second request is not encoded, its placeholders take the first's rows from the cache. The check names the cache,
    the item's positions and the donor, from the fingerprints of what each request sent."""
    runner = FakeRunner()
    watcher = serve(runner, tmp_path)
    runner.add(request("a", [image("4x4", seed=1)], qdebug_id="first"))
    runner.step({"a": None})
    runner.add(request("b", [image("4x4", seed=2)], qdebug_id="second"))
    runner.add(request("c", [image("img-c")]))
    with torch.inference_mode():
        theirs, own = _encoded(runner, "a"), runner.model.embed_multimodal(
            pixel_values=runner.waiting["b"].mm_features[0].inputs()[0], image_grid_thw=torch.tensor([[1, 4, 4]]))[0]
    runner.step({"a": 1, "b": None, "c": None})
    landed = _landed(runner, "b")
    assert torch.equal(landed, theirs) and not torch.allclose(landed, own)  # what the step did, read from the rows
    [found] = _findings(watcher)
    assert (found.check, found.outcome, found.stage, found.request_id, found.client_id) == ("cache", "violation", "encode", "b", "second")
    assert found.donors == ["a"] and found.cobatched == ["a", "c"], found
    assert found.evidence.startswith("encoder_cache served image item 0 (positions 3..6) computed by a (first)"), found.evidence
    counters = _counters(watcher)
    assert counters["violations"]["cache"] == 1 == counters["checks"]["cache"] and counters["errors"]["cache"] == 0, counters


def test_cache_stays_silent_when_the_encoder_cache_serves_the_same_image_again(tmp_path):
    """The same image sent twice, one encoder-cache key: the second request's rows are the first's, legitimately; the
    read is checked and counted as the same content."""
    runner = FakeRunner()
    watcher = serve(runner, tmp_path)
    runner.add(request("a", [image("4x4", seed=1)]))
    runner.step({"a": None})
    runner.add(request("b", [image("4x4", seed=1)]))
    runner.step({"a": 1, "b": None})
    assert torch.equal(_landed(runner, "b"), _encoded(runner, "b"))
    assert _findings(watcher) == []
    counters = _counters(watcher)
    assert counters["checks"]["cache"] == 1 and counters["violations"]["cache"] == 0 == counters["errors"]["cache"], counters
