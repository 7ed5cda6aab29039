"""The watch's checks are registered entries (engine/watch_registry.py): the registry holds exactly vocab's checks, and a
check registered from outside the engine is installed, dispatched at its point, counted and logged by the Watcher, and
placed in the trace table, with no change to watch_engine.py."""

from __future__ import annotations

import pytest
import torch

from qdebug.engine import watch_registry
from qdebug.engine.watch_log import read_findings
from qdebug.engine.watch_registry import BEFORE_DECODER_POINTS, ItemAt, Need, Point, WatchEntry, entries, register, unregister
from qdebug.engine.watch_traces import AFTER_DECODER, BEFORE_DECODER, after_decoder, before_decoder, trace_said
from qdebug.vocab import WATCH_CHECKS, StageName, WatchCheck

from tests.engine_fakes import FakeRunner, _step_items, image, request, serve

FAKE_ITEM, FAKE_LOGITS = "fake_zero_rows", "fake_logit_sign"


def test_the_registry_holds_exactly_vocabs_checks_each_once():
    registered = [e.check for e in entries()]
    assert registered == [c.value for c in WATCH_CHECKS]  # one entry per check, in vocab's order: none missing, none extra
    for entry in entries():
        assert isinstance(entry.point, Point) and entry.needs and all(isinstance(n, Need) for n in entry.needs), entry
        assert isinstance(entry.sampled, bool)
    assert {e.check for e in entries(Point.ITEM)} == {WatchCheck.PLACEMENT, WatchCheck.COUNTS}
    assert [e.check for e in entries() if e.once_per_item] == [WatchCheck.COUNTS]
    assert {e.check for e in entries() if not e.sampled} == {WatchCheck.PLACEMENT, WatchCheck.COUNTS, WatchCheck.CACHE}


def test_the_trace_table_is_the_registrys_points():
    assert AFTER_DECODER == {WatchCheck.LAYOUT, WatchCheck.LOGITS}
    assert BEFORE_DECODER == set(WATCH_CHECKS) - AFTER_DECODER
    assert all((e.point in BEFORE_DECODER_POINTS) == (e.check in BEFORE_DECODER) for e in entries())


def test_a_check_cannot_be_registered_twice_under_one_name():
    class Again(WatchEntry):
        check, point, sampled, needs = WatchCheck.COUNTS, Point.ITEM, False, frozenset({Need.ITEMS})

    with pytest.raises(ValueError, match="watch check counts registered twice"):
        register(Again)


class ZeroRows(WatchEntry):
    """A check from outside the engine: an item whose placeholder rows this step are all zero."""

    check = FAKE_ITEM
    point = Point.ITEM
    sampled = False
    needs = frozenset({Need.ITEMS, Need.MERGED_ROWS})
    stage = StageName.SYNC
    installed = 0

    def install(self) -> None:
        ZeroRows.installed += 1

    def findings(self, at: ItemAt) -> list:
        rows = at.out[at.start + at.rows[0]:at.start + at.rows[-1] + 1]
        if bool((rows == 0).all()):
            return [self.watcher.finding(self.check, at.rid, at.state, f"item {at.item.index}: {len(at.rows)} rows all zero", [], at.req_ids)]
        return []


class LogitSign(WatchEntry):
    """A sampled check after the decoder: a logits row that is all negative."""

    check = FAKE_LOGITS
    point = Point.LOGITS
    sampled = True
    needs = frozenset({Need.LOGITS})
    stage = StageName.LOGITS

    def findings(self, logits) -> list:
        ids = list(self.watcher.runner.input_batch.req_ids)
        return [self.watcher.step_finding(self.check, self.stage, [ids[i]], "all negative") for i in range(logits.shape[0])
                if bool((logits[i] < 0).all())]


@pytest.fixture
def registered():
    register(ZeroRows)
    register(LogitSign)
    ZeroRows.installed = 0
    yield
    unregister(FAKE_ITEM)
    unregister(FAKE_LOGITS)
    assert [e.check for e in watch_registry.entries()] == [c.value for c in WATCH_CHECKS]


def _zero_bs_rows(runner: FakeRunner) -> None:
    """The merge leaves b's placeholder rows zero (the fault the registered check looks for)."""
    merge = runner.model.embed_input_ids

    def embed_input_ids(input_ids, multimodal_embeddings=None, **kwargs):
        if multimodal_embeddings:
            owners = _step_items(runner)
            multimodal_embeddings = [torch.zeros_like(x) if owners[i] == "b" else x for i, x in enumerate(multimodal_embeddings)]
        return merge(input_ids, multimodal_embeddings, **kwargs)

    runner.model.embed_input_ids = embed_input_ids


def test_a_registered_check_is_installed_dispatched_counted_and_logged(tmp_path, registered):
    runner = FakeRunner()
    _zero_bs_rows(runner)
    watcher = serve(runner, tmp_path, sample=0.0)
    assert ZeroRows.installed == 1
    for rid in ("a", "b", "c"):
        runner.add(request(rid, [image(f"img-{rid}")]))
    runner.step({"a": None, "b": 5, "c": None})  # b's prompt in two steps: its item's rows in each
    runner.step({"a": 1, "b": None, "c": 1})
    counters = watcher.counters.snapshot()
    # a, c once; b in both steps (its rows split): 4 runs, b's two violations; the sampled logits check never ran
    assert counters["checks"][FAKE_ITEM] == 4 and counters["violations"][FAKE_ITEM] == 2, counters
    assert counters["checks"].get(FAKE_LOGITS, 0) == 0
    watcher.findings.drain()
    found = [f for f in read_findings(watcher.settings.folder) if f.check == FAKE_ITEM]
    assert [(f.request_id, f.stage, f.outcome) for f in found] == [("b", "sync", "violation")] * 2, found
    assert found[0].cobatched == ["a", "c"] and found[0].evidence.startswith("item 0: ")
    assert FAKE_ITEM in before_decoder() and FAKE_LOGITS in after_decoder()  # the trace table reads the registry
    assert trace_said(FAKE_LOGITS, "violation", "").startswith("no trace: this check runs after the step's decoder")


def test_a_registered_sampled_check_runs_on_sampled_steps_and_its_errors_are_counted(tmp_path, registered):
    runner = FakeRunner()
    watcher = serve(runner, tmp_path, sample=1.0, raising=frozenset({FAKE_ITEM}))
    runner.add(request("a", [image("img-a")]))
    runner.step({"a": None})
    runner.step({"a": 1})
    counters = watcher.counters.snapshot()
    assert counters["checks"][FAKE_LOGITS] == 2, counters  # one per sampled step
    assert counters["errors"][FAKE_ITEM] == counters["checks"][FAKE_ITEM] == 1, counters  # raised: counted, step went on
    watcher.findings.drain()
    errors = [f for f in read_findings(watcher.settings.folder) if f.check == FAKE_ITEM]
    assert [(f.outcome, f.stage) for f in errors] == [("error", "sync")]


def test_a_registered_check_whose_own_code_raises_is_counted_and_the_engine_never_sees_it(tmp_path):
    """A check at the merge whose `applies` raises: each step counts one error against it, logs it, and the logits are
    those of the unwatched runner."""
    class Broken(WatchEntry):
        check, point, sampled, needs = "fake_broken", Point.MERGE, False, frozenset({Need.MERGED_ROWS})

        def applies(self) -> bool:
            raise RuntimeError("no merge rows here")

    expected = FakeRunner()
    expected.add(request("a", [image("img-a")]))
    register(Broken)
    try:
        runner = FakeRunner()
        watcher = serve(runner, tmp_path)
        runner.add(request("a", [image("img-a")]))
        assert torch.equal(runner.step({"a": None}), expected.step({"a": None}))
        assert torch.equal(runner.step({"a": 1}), expected.step({"a": 1}))
    finally:
        unregister("fake_broken")
    counters = watcher.counters.snapshot()
    assert counters["errors"]["fake_broken"] == counters["checks"]["fake_broken"] == 2, counters
    watcher.findings.drain()
    [first, _] = [f for f in read_findings(watcher.settings.folder) if f.check == "fake_broken"]
    assert first.outcome == "error" and "the check raised RuntimeError: no merge rows here" in first.evidence
