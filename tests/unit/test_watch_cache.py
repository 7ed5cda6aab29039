"""The watch's `cache` check without vLLM: a Watcher on a bare runner, stepped with scheduler outputs shaped as vLLM
0.32's (`SchedulerOutput`, `NewRequestData`, `MultiModalFeatureSpec`) whose engine-core reads come from the real
`CacheLedger` (as the engine core makes them) and whose encoder-cache reads the real `CacheWitness` finds. Another
request's content served from a cache is counted, logged with the cache, the reused range and the donor, and recorded
by the flight recorder; the same image twice, a shared system prompt and the same video twice are never violations."""

from __future__ import annotations

import json
from types import SimpleNamespace as NS

import pytest
from PIL import Image

from qdebug.engine.cache_core import CacheLedger
from qdebug.engine.cache_reads import MEDIA_ARG, READS_ARG, fingerprint
from qdebug.engine.cache_witness import CacheWitness
from qdebug.engine.watch_engine import Watcher
from qdebug.engine.watch_log import read_findings
from qdebug.engine.watch_metrics import read_counters
from qdebug.engine.watch_settings import WatchSettings
from qdebug.vocab import WatchCheck

BLOCK = 4
TOKENS = [1, 2, 9, 9, 9, 9, 3, 4, 5]  # an image's 4 placeholders at positions 2..5
RED = fingerprint(Image.new("RGB", (28, 28), (255, 0, 0)))
BLUE = fingerprint(Image.new("RGB", (28, 28), (0, 0, 255)))
CACHE = WatchCheck.CACHE.value


def _feature(offset: int, identifier: str, modality: str = "image") -> NS:
    return NS(modality=modality, identifier=identifier, mm_hash=identifier, mm_position=NS(offset=offset, length=4), data=None)


class Engine:
    """The engine core's ledger and the worker's watcher, fed the same requests as vLLM feeds them."""

    def __init__(self, tmp_path, raising: frozenset[str] = frozenset()) -> None:
        self.ledger = CacheLedger()
        self.folder = tmp_path / "watch"
        (self.folder / "traces").mkdir(parents=True)
        self.tracer = NS(writer=NS(trace_dir=NS(root=str(self.folder / "traces"))), pending=set(), traced={}, bounded={},
                         _hooks=lambda on: None)
        runner = NS(model=NS(model=NS(layers=[])), model_config=NS(hf_config=NS()), requests={},
                    _qdebug_witness=CacheWitness(), _qdebug_tracer=self.tracer)
        self.watcher = Watcher(runner, WatchSettings(sample=0.0, folder=str(self.folder), log_bytes=1 << 20, raising=raising, run="r"))
        self.ran: list = []

    def request(self, rid: str, tokens: list[int], features: list[NS], prints: list[str], *, name: str = "",
                processor: list | None = None, hits: tuple[list[int], int] | None = None):
        """The engine core's view of a new request (admitted; its prefix hits judged), then the
        worker's: its NewRequestData, with the reads the engine core attached, starting after its prefix hits."""
        extra = {MEDIA_ARG: {"prints": prints, "processor": processor or [None] * len(prints)}, **({"qdebug_id": name} if name else {})}
        core = NS(request_id=rid, _all_token_ids=tokens, all_token_ids=tokens, mm_features=features, sampling_params=NS(extra_args=extra),
                  num_computed_tokens=0)
        self.ledger.admitted(core)
        computed = 0
        if hits is not None:
            blocks, computed = hits
            self.ledger.served(core, [NS(block_id=b, is_null=False) for b in blocks], computed, 0)
        return NS(req_id=rid, mm_features=features, sampling_params=core.sampling_params, num_computed_tokens=computed, prompt_token_ids=tokens)

    def fill(self, rid: str, tokens: list[int], features: list[NS], prints: list[str], blocks: list[int], name: str = "") -> None:
        """Request `rid` computed and cached these KV blocks (as BlockPool.cache_full_blocks tells the ledger)."""
        extra = {MEDIA_ARG: {"prints": prints}, **({"qdebug_id": name} if name else {})}
        core = NS(request_id=rid, _all_token_ids=tokens, all_token_ids=tokens, mm_features=features, sampling_params=NS(extra_args=extra))
        self.ledger.filled(core, [NS(block_id=b, is_null=False) for b in blocks], 0, len(blocks), BLOCK)

    def step(self, new=(), encode=None, tokens=None, finished=()):
        """One scheduler step through the watch's hooks around vLLM's step (as the runner's StepHooks call them);
        vLLM's own step answers `self.ran`'s length."""
        out = NS(scheduled_new_reqs=list(new), scheduled_encoder_inputs=encode or {}, num_scheduled_tokens=tokens or {},
                 finished_req_ids=set(finished), free_encoder_mm_hashes=[])

        def execute(scheduler_output):
            self.ran.append(scheduler_output)
            return len(self.ran)

        self.watcher.before(out)
        result = None
        try:
            result = execute(out)
            return result
        finally:
            self.watcher.after(out, result)

    def results(self) -> tuple[dict, list]:
        self.watcher.findings.drain()
        self.watcher.flight.drain()
        self.watcher.counters.flush()
        return read_counters(str(self.folder), "r"), read_findings(str(self.folder))


def test_another_requests_image_served_from_each_cache_is_a_violation_naming_the_cache_range_and_donor(tmp_path):
    engine = Engine(tmp_path)
    red = [_feature(2, "k")]
    first = engine.request("req-0", TOKENS, red, [RED], name="capture-0")
    engine.step([first], encode={"req-0": [0]}, tokens={"req-0": 9})
    engine.fill("req-0", TOKENS, red, [RED], [10, 11], name="capture-0")
    # req-1 sends a blue image under the same key: the processor cache and the prefix cache serve req-0's red one
    second = engine.request("req-1", TOKENS, [_feature(2, "k")], [BLUE], name="capture-1", processor=[True], hits=([10, 11], 8))
    # req-2 sends blue too, under the same key, with no prefix hit: the encoder cache serves req-0's rows
    third = engine.request("req-2", TOKENS, [_feature(2, "k")], [BLUE], name="capture-2")
    engine.step([second, third], tokens={"req-1": 1, "req-2": 9, "req-0": 1})
    counters, found = engine.results()

    assert counters["checks"][CACHE] == 3 and counters["violations"][CACHE] == 3 and counters["errors"][CACHE] == 0, counters
    assert counters["reads"]["processor_cache/other_content"] == 1 == counters["reads"]["prefix_cache/other_content"]
    assert counters["reads"]["encoder_cache/other_content"] == 1 and sum(counters["reads"].values()) == 3
    by_cache = {f.evidence.split(" ", 1)[0]: f for f in found}
    assert set(by_cache) == {"processor_cache", "prefix_cache", "encoder_cache"} and len(found) == 3, [f.evidence for f in found]
    assert all(f.check == CACHE and f.outcome == "violation" and f.donors == ["req-0"] for f in found), found
    prefix, processor, encoder = by_cache["prefix_cache"], by_cache["processor_cache"], by_cache["encoder_cache"]
    assert (prefix.request_id, prefix.client_id, prefix.stage) == ("req-1", "capture-1", "sync")
    assert prefix.evidence.startswith("prefix_cache served positions 0..7 computed by req-0 (capture-0): ")
    assert f"image item 0 of fingerprint {BLUE[:8]}" in prefix.evidence and f"fingerprint {RED[:8]}" in prefix.evidence
    assert (processor.request_id, processor.stage) == ("req-1", "preprocess")
    assert processor.evidence.startswith("processor_cache served image item 0 (positions 2..5) computed by req-0 (capture-0): ")
    assert (encoder.request_id, encoder.client_id, encoder.stage) == ("req-2", "capture-2", "encode")
    assert f"has fingerprint {BLUE[:8]}" in encoder.evidence and f"of fingerprint {RED[:8]}" in encoder.evidence
    assert "req-2" in prefix.cobatched and "req-1" not in prefix.cobatched
    # the flight recorder: both readers start in this step, before its decoder runs: one recording traces them (under
    # the names their clients gave them, as the tracer names the files; req-0, decoding, is not), and the ring is
    # written beside the log once
    assert (prefix.trace, processor.trace, encoder.trace) == ("traces/capture-1.qdt", "traces/capture-1.qdt", "traces/capture-2.qdt")
    assert engine.tracer.pending == {"req-1", "req-2"}
    (snapshot,) = [json.loads(p.read_text()) for p in engine.folder.glob("flight-*.json")]
    assert snapshot["request_id"] == "req-1" and set(snapshot["traced"]) == {"req-1", "req-2"}
    assert snapshot["steps"][-1]["requests"] == {"req-1": 1, "req-2": 9, "req-0": 1}
    assert engine.ran and engine.step() == 3  # vLLM's steps ran, their answers passed through


def test_legitimate_reuse_is_counted_and_never_a_violation(tmp_path):
    engine = Engine(tmp_path)
    red = [_feature(2, "h-red")]
    engine.step([engine.request("a", TOKENS, red, [RED])], encode={"a": [0]}, tokens={"a": 9})
    engine.fill("a", TOKENS, red, [RED], [10, 11])
    # the same image sent again: the processor cache and the prefix cache serve a's, computed from the same pixels
    again = engine.request("a-again", TOKENS, [_feature(2, "h-red")], [RED], processor=[True], hits=([10, 11], 8))
    # a long shared system prompt, then different images: the prompt's blocks are shared, up to where the images start
    text = [5] * 8 + TOKENS
    engine.fill("sys-1", text, [_feature(10, "h1")], [RED], [20, 21, 22, 23])
    shared = engine.request("sys-2", text, [_feature(10, "h2")], [BLUE], hits=([20, 21], 8))
    # a different image at the same positions: nothing served
    other = engine.request("b", TOKENS, [_feature(2, "h-blue")], [BLUE])
    engine.step([again, shared, other], encode={"b": [0], "sys-2": [0]}, tokens={"a-again": 1, "sys-2": 9, "b": 9})
    # the same video twice: the second's item is computed from the encoder cache, from the first's encoding
    video = [_feature(2, "v", "video")]
    engine.step([engine.request("v1", TOKENS, video, [RED])], encode={"v1": [0]}, tokens={"v1": 9})
    engine.step([engine.request("v2", TOKENS, [_feature(2, "v", "video")], [RED])], tokens={"v2": 9})
    counters, found = engine.results()

    assert found == [] and not list(engine.folder.glob("flight-*.json")), [f.evidence for f in found]
    assert counters["violations"][CACHE] == 0 == counters["errors"][CACHE], counters
    assert counters["reads"] == {**dict.fromkeys(counters["reads"], 0), "processor_cache/same_content": 1,
                                 "prefix_cache/same_content": 2, "encoder_cache/same_content": 1}, counters["reads"]
    assert counters["checks"][CACHE] == 4


def test_an_unverified_read_is_counted_as_such_and_is_no_violation(tmp_path):
    engine = Engine(tmp_path)
    # positions served from blocks no one is on record as having filled (cached before the plugin attached)
    reader = engine.request("r", TOKENS, [_feature(2, "x")], [RED], hits=([99], BLOCK))
    engine.step([reader], tokens={"r": 5})
    counters, found = engine.results()
    assert found == [] and counters["violations"][CACHE] == 0 and counters["checks"][CACHE] == 1, counters
    assert counters["reads"]["prefix_cache/unverified"] == 1


def test_a_cache_check_that_raises_is_counted_and_logged_and_the_step_runs(tmp_path):
    engine = Engine(tmp_path, raising=frozenset({CACHE}))
    red = [_feature(2, "k")]
    engine.step([engine.request("a", TOKENS, red, [RED])], encode={"a": [0]}, tokens={"a": 9})
    engine.fill("a", TOKENS, red, [RED], [10, 11])
    assert engine.step([engine.request("b", TOKENS, [_feature(2, "k")], [BLUE], processor=[True], hits=([10, 11], 8))],
                       tokens={"b": 1}) == 2
    counters, found = engine.results()
    assert counters["errors"][CACHE] == 2 == counters["checks"][CACHE] and counters["violations"][CACHE] == 0, counters
    (line,) = found
    assert (line.check, line.outcome) == (CACHE, "error") and "QDEBUG_VLLM_WATCH_RAISE names cache" in line.evidence


@pytest.mark.parametrize("witness", [False, True])
def test_a_step_with_no_reads_counts_no_cache_check(tmp_path, witness):
    engine = Engine(tmp_path)
    if not witness:  # the plugin's tracer not attached (its folder not writable): no provenance, nothing checked
        del engine.watcher.runner._qdebug_witness
    engine.step([engine.request("a", TOKENS, [_feature(2, "k")], [RED])], encode={"a": [0]}, tokens={"a": 9})
    counters, found = engine.results()
    assert counters["checks"][CACHE] == 0 and found == [] and len(engine.ran) == 1
