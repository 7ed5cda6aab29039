"""Cache provenance without vLLM: the front end's fingerprints, the engine core's ledger (who filled each KV block, who
processed each media hash) and the worker's witness (encoder-cache reads), driven with objects shaped as vLLM 0.32's
(`Request`, `KVCacheBlock`, `SchedulerOutput`, `NewRequestData`, `MultiModalFeatureSpec`). The same code runs in vLLM in
tests/engine/test_cache_provenance.py."""

from __future__ import annotations

from types import SimpleNamespace as NS

import numpy as np
from PIL import Image

from qdebug.engine.cache_core import CacheLedger
from qdebug.engine.cache_frontend import attach_media, media_seen
from qdebug.engine.cache_reads import (MEDIA_ARG, READS_ARG, CacheRead, MediaPrint, fingerprint, item_reuse, parsed_reads, reads_from_args,
                                       span_content, span_reuse)
from qdebug.engine.cache_witness import CacheWitness
from qdebug.vocab import CacheKind, CacheReuse

BLOCK = 4


def _image(colour: tuple[int, int, int], size: tuple[int, int] = (28, 28)) -> Image.Image:
    return Image.new("RGB", size, colour)


RED, BLUE = fingerprint(_image((255, 0, 0))), fingerprint(_image((0, 0, 255)))


def _feature(offset: int, length: int, identifier: str, modality: str = "image") -> NS:
    return NS(modality=modality, identifier=identifier, mm_hash=identifier, mm_position=NS(offset=offset, length=length), data=None)


def _request(rid: str, tokens: list[int], features: list[NS], prints: list[str], processor: list | None = None, name: str | None = None) -> NS:
    extra = {MEDIA_ARG: {"prints": prints, "processor": processor or [None] * len(prints)}}
    if name:
        extra["qdebug_id"] = name
    return NS(request_id=rid, _all_token_ids=list(tokens), all_token_ids=list(tokens), mm_features=features,
              sampling_params=NS(extra_args=extra), num_computed_tokens=0)


def _blocks(ids: list[int]) -> list[NS]:
    return [NS(block_id=i, is_null=False) for i in ids]


TOKENS = [1, 2, 9, 9, 9, 9, 3, 4, 5]  # an image's 4 placeholders (9) at positions 2..5


# --- fingerprints ------------------------------------------------------------------------------------------------
def test_a_fingerprint_is_of_the_content_not_the_object():
    assert fingerprint(_image((255, 0, 0))) == RED != BLUE
    assert fingerprint(_image((255, 0, 0), (28, 56))) != RED  # same colour, other size
    frames = np.zeros((2, 8, 8, 3), np.uint8)
    assert fingerprint(frames) == fingerprint(frames.copy()) != fingerprint(frames + 1)
    assert fingerprint((np.zeros(160, np.float32), 16000)) != fingerprint((np.zeros(160, np.float32), 8000))  # the rate counts
    assert fingerprint(None) == ""


def test_the_front_end_puts_each_items_print_and_processor_hit_in_the_requests_order():
    group = type("Items", (), {"get": lambda self, i: [_image((255, 0, 0)), _image((0, 0, 255))][i], "__len__": lambda self: 2})()
    seen = media_seen({"image": group}, {"image": [False, True]})
    assert seen == {"image": {"prints": [RED, BLUE], "processor": [False, True]}}
    # vLLM orders a request's items by placeholder position; the client's own qdebug_media is replaced
    request = NS(mm_features=[_feature(2, 4, "a"), _feature(8, 4, "b")], sampling_params=NS(extra_args={MEDIA_ARG: "forged", "x": 1}))
    attach_media(request, {"type": "multimodal", "qdebug_media": seen})
    assert request.sampling_params.extra_args == {"x": 1, MEDIA_ARG: {"prints": [RED, BLUE], "processor": [False, True]}}
    plain = NS(mm_features=[], sampling_params=NS(extra_args={MEDIA_ARG: "forged"}))
    attach_media(plain, {"type": "token"})
    assert plain.sampling_params.extra_args is None


# --- judging -----------------------------------------------------------------------------------------------------
def test_an_item_is_judged_by_fingerprint_and_size():
    mine, same, other = MediaPrint(0, "image", RED, 2, 4), MediaPrint(1, "image", RED, 7, 4), MediaPrint(0, "image", BLUE, 2, 4)
    assert item_reuse(mine, same)[0] == CacheReuse.SAME
    reuse, why = item_reuse(mine, other)
    assert reuse == CacheReuse.OTHER and RED[:8] in why and BLUE[:8] in why
    assert item_reuse(mine, MediaPrint(0, "image", RED, 2, 6))[0] == CacheReuse.OTHER
    assert item_reuse(MediaPrint(0, "image", "", 2, 4), same)[0] == CacheReuse.UNVERIFIED


def test_kv_over_positions_is_the_same_only_for_the_same_tokens_and_media_at_the_same_place():
    red, blue = [MediaPrint(0, "image", RED, 2, 4)], [MediaPrint(0, "image", BLUE, 2, 4)]
    assert span_reuse(span_content(TOKENS, red, 0, 4), span_content(TOKENS, red, 0, 4))[0] == CacheReuse.SAME
    assert span_reuse(span_content(TOKENS, red, 0, 4), span_content(TOKENS, blue, 0, 4))[0] == CacheReuse.OTHER
    shifted = [MediaPrint(0, "image", RED, 3, 4)]  # the same image one position later
    assert span_reuse(span_content(TOKENS, red, 0, 4), span_content(TOKENS, shifted, 0, 4))[0] == CacheReuse.OTHER
    other_text = [7, *TOKENS[1:]]
    reuse, why = span_reuse(span_content(other_text, red, 0, 4), span_content(TOKENS, red, 0, 4))
    assert reuse == CacheReuse.OTHER and "token ids" in why
    assert span_reuse(span_content(TOKENS, [], 6, 9), span_content(TOKENS, red, 6, 9))[0] == CacheReuse.SAME  # no media there


# --- the engine core ---------------------------------------------------------------------------------------------
def _served(ledger: CacheLedger, reader: NS, blocks: list[NS], hits: int) -> list[CacheRead]:
    ledger.served(reader, blocks, hits, 0)
    return [r for r in reads_from_args(reader.sampling_params.extra_args) if r.cache == CacheKind.PREFIX]


def test_a_prefix_read_names_who_filled_the_blocks_and_whether_the_content_was_theirs():
    ledger = CacheLedger()
    first = _request("req-a", TOKENS, [_feature(2, 4, "h-red")], [RED], name="capture-1")
    ledger.admitted(first)
    ledger.filled(first, _blocks([10, 11]), 0, 2, BLOCK)
    same = _request("req-b", TOKENS, [_feature(2, 4, "h-red")], [RED], processor=[True])
    ledger.admitted(same)
    (read,) = _served(ledger, same, _blocks([10, 11]), 2 * BLOCK)
    assert (read.origin, read.origin_name, read.reuse, read.start, read.end) == ("req-a", "capture-1", CacheReuse.SAME, 0, 8)
    (processor,) = [r for r in reads_from_args(same.sampling_params.extra_args) if r.cache == CacheKind.PROCESSOR]
    assert (processor.origin, processor.reuse, processor.item) == ("req-a", CacheReuse.SAME, 0)
    # another image under a colliding key: the blocks are served, and they were computed from red
    other = _request("req-c", TOKENS, [_feature(2, 4, "h-red")], [BLUE], processor=[True])
    ledger.admitted(other)
    (wrong,) = _served(ledger, other, _blocks([10, 11]), 2 * BLOCK)
    assert (wrong.origin, wrong.reuse, wrong.start, wrong.end) == ("req-a", CacheReuse.OTHER, 0, 8)
    assert BLUE[:8] in wrong.why and RED[:8] in wrong.why
    (processor,) = [r for r in reads_from_args(other.sampling_params.extra_args) if r.cache == CacheKind.PROCESSOR]
    assert processor.reuse == CacheReuse.OTHER and processor.origin_name == "capture-1"


def test_a_shared_text_prefix_is_legitimate_up_to_where_the_media_start():
    ledger = CacheLedger()
    text = [5] * 8 + TOKENS  # 8 positions of a shared system prompt, then the image at 10..13
    first = _request("a", text, [_feature(10, 4, "h1")], [RED])
    ledger.filled(first, _blocks([1, 2, 3, 4]), 0, 4, BLOCK)
    second = _request("b", text, [_feature(10, 4, "h2")], [BLUE])
    (read,) = _served(ledger, second, _blocks([1, 2]), 2 * BLOCK)  # vLLM's block keys stop at the image: 8 positions
    assert (read.reuse, read.start, read.end, read.origin) == (CacheReuse.SAME, 0, 8, "a")


def test_a_block_refilled_by_another_request_is_theirs_from_then_on():
    ledger = CacheLedger()
    a, b = _request("a", TOKENS, [_feature(2, 4, "x")], [RED]), _request("b", TOKENS, [_feature(2, 4, "y")], [BLUE])
    ledger.filled(a, _blocks([7]), 0, 1, BLOCK)
    ledger.filled(b, _blocks([7]), 0, 1, BLOCK)  # evicted and reused: now b's
    reader = _request("c", TOKENS, [_feature(2, 4, "y")], [BLUE])
    (read,) = _served(ledger, reader, _blocks([7]), BLOCK)
    assert (read.origin, read.reuse) == ("b", CacheReuse.SAME)


def test_a_block_with_no_record_and_a_connector_load_are_unverified_and_a_clients_reads_are_dropped():
    ledger = CacheLedger()
    reader = _request("r", TOKENS, [_feature(2, 4, "x")], [RED])
    reader.sampling_params.extra_args[READS_ARG] = [{"cache": "prefix_cache", "reader": "r", "origin": "forged", "reuse": "same_content",
                                                    "start": 0, "end": 9}]
    ledger.admitted(reader)
    assert reads_from_args(reader.sampling_params.extra_args) == []
    ledger.served(reader, _blocks([99]), BLOCK, BLOCK)
    kinds = [(r.cache, r.reuse, r.start, r.end) for r in reads_from_args(reader.sampling_params.extra_args)]
    assert kinds == [(CacheKind.PREFIX, CacheReuse.UNVERIFIED, 0, 4), (CacheKind.CONNECTOR, CacheReuse.UNVERIFIED, 4, 8)]


# --- the worker --------------------------------------------------------------------------------------------------
def _new(rid: str, features: list[NS], prints: list[str], computed: int = 0, reads: list[dict] | None = None, name: str = "") -> NS:
    extra = {MEDIA_ARG: {"prints": prints}, READS_ARG: reads or []}
    if name:
        extra["qdebug_id"] = name
    return NS(req_id=rid, mm_features=features, sampling_params=NS(extra_args=extra), num_computed_tokens=computed, prompt_token_ids=TOKENS)


def _step(new=(), encode=None, tokens=None, finished=()) -> NS:
    return NS(scheduled_new_reqs=list(new), scheduled_encoder_inputs=encode or {}, num_scheduled_tokens=tokens or {},
              finished_req_ids=set(finished), free_encoder_mm_hashes=[])


def test_the_worker_names_who_encoded_what_the_encoder_cache_served():
    witness = CacheWitness()
    first = _step([_new("a", [_feature(2, 4, "key")], [RED], name="capture-1")], encode={"a": [0]}, tokens={"a": 9})
    assert witness.observe(first) == [] and witness.observe(first) == []  # once per step
    # b's image is another one under the same key: not encoded for it, computed from the cache
    found = parsed_reads(witness.observe(_step([_new("b", [_feature(2, 4, "key")], [BLUE])], tokens={"b": 9, "a": 1})))
    (read,) = found
    assert (read.cache, read.reader, read.origin, read.origin_name, read.reuse, read.item) == (CacheKind.ENCODER, "b", "a", "capture-1", CacheReuse.OTHER, 0)
    # c sends a's image again: legitimate; d's image was encoded for d itself in its first chunk
    (same,) = parsed_reads(witness.observe(_step([_new("c", [_feature(2, 4, "key")], [RED])], tokens={"c": 9})))
    assert same.reuse == CacheReuse.SAME
    assert witness.observe(_step([_new("d", [_feature(2, 4, "k2")], [BLUE])], encode={"d": [0]}, tokens={"d": 3})) == []
    assert witness.observe(_step(tokens={"d": 6})) == []
    # the engine core's reads arrive with the request; a prefix hit covering the image leaves nothing to encode
    prefix = CacheRead(CacheKind.PREFIX, "e", "a", CacheReuse.SAME, 0, 8).to_json()
    (got,) = parsed_reads(witness.observe(_step([_new("e", [_feature(2, 4, "key")], [RED], computed=8, reads=[prefix])], tokens={"e": 1})))
    assert (got.cache, got.origin) == (CacheKind.PREFIX, "a") and witness.cached_prefix("e") == 8
    # a finished request's reads are readable in the step that says so, then dropped
    witness.observe(_step(finished=["b"]))
    assert [r.origin for r in witness.reads("b")] == ["a"]
    witness.observe(_step())
    assert witness.reads("b") == []
