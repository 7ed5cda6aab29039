"""Cache provenance in vLLM's engine core, where the scheduler decides what a request reads from a cache.

Where it listens (vLLM 0.32; shared/DESIGN.md "Seams in vLLM"):
- `Scheduler.add_request` (wrapped): a new request's items (vLLM's `mm_features`: placeholders, media hash) with the
  fingerprints and processor-cache hits the front end attached (engine/cache_frontend.py). An item the processor cache
  served is judged against the request that processed that media hash (kept here, in arrival order); every other item
  makes its request the one that processed it;
- `BlockPool.cache_full_blocks` (wrapped): each KV block a request fills is recorded as computed by it, from what
  (`cache_reads.span_content`: its token ids and the media in it, by fingerprint), by block id;
- `KVCacheManager.allocate_slots` (wrapped): when a request is first scheduled with prefix-cache hits, each hit block is
  judged against the record of who filled it; positions a KV connector loaded are recorded with no origin.
The reads go into the request's `extra_args[cache_reads.READS_ARG]` before its first step is sent to the worker, which
checks, traces and logs them (engine/cache_witness.py). What is kept is bounded: one record per KV block of the pool,
the media hashes of the last `PROCESSED` items, each live request's items.

What it costs: the ledger times its own work (`seconds`, `calls`) and the scheduler's (`Scheduler.schedule`,
`add_request` and `update_from_output`, the recording inside them included: `scheduler_seconds`), and, with a trace
folder, writes both to `core-<pid>.json` there at most once a second (benchmarks/engine.py prints the share).
"""

from __future__ import annotations

import logging
import os
import time
from collections import OrderedDict

from qdebug.vocab import CacheKind, CacheReuse

from .cache_reads import (MEDIA_ARG, READS_ARG, BlockOrigin, CacheRead, MediaPrint, item_reuse, merged_prefix_reads,
                          prints_from_args, span_content)
from .request_names import client_name

log = logging.getLogger("vllm.qdebug")
PROCESSED = 65536  # media hashes whose processor remembers (the front end's cache holds far fewer items)
CORE_FILE = "core-{pid}.json"  # in the trace folder: the engine core's recording time against its scheduler's
CORE_KEYS = ("seconds", "calls", "scheduler_seconds", "scheduler_calls")


class CacheLedger:
    """Who computed what the caches hold, and the reads each request made (one per engine-core process)."""

    def __init__(self) -> None:
        self.blocks: dict[int, BlockOrigin] = {}  # KV block id → who filled it, from what
        self.processed: OrderedDict[str, tuple[str, str, MediaPrint]] = OrderedDict()  # media hash → (request, name, item)
        self.seconds = 0.0  # the time spent here (benchmarks/engine.py: its share of the scheduler's)
        self.calls = 0
        self.scheduler_seconds = 0.0  # the scheduler's wall time in the calls wrapped (this recording's included)
        self.scheduler_calls = 0
        self.published = False  # core-<pid>.json is being written

    def snapshot(self) -> dict[str, float]:
        """The recording's time and the scheduler's (CORE_KEYS; JSON-ready)."""
        return {"seconds": self.seconds, "calls": self.calls, "scheduler_seconds": self.scheduler_seconds,
                "scheduler_calls": self.scheduler_calls}

    def publish(self) -> None:
        """Write the snapshot to the trace folder's `core-<pid>.json` from now on (once per process; none without a
        trace folder)."""
        folder = os.environ.get("QDEBUG_VLLM_TRACE_DIR")
        if self.published or not folder:
            return
        self.published = True
        from .plugin_clock import publish

        publish(self, folder, CORE_FILE)

    # what each request is made of --------------------------------------------------------------------------------
    @staticmethod
    def media(request) -> list[MediaPrint]:
        """The request's items as qdebug knows them (kept on the request: computed once)."""
        cached = getattr(request, "_qdebug_media", None)
        if cached is None:
            params = getattr(request, "sampling_params", None)
            prints = prints_from_args(getattr(params, "extra_args", None)) or []
            cached = []
            for i, feature in enumerate(getattr(request, "mm_features", None) or []):
                pos = feature.mm_position
                cached.append(MediaPrint(i, str(feature.modality), prints[i] if i < len(prints) else "", int(pos.offset), int(pos.length)))
            try:
                request._qdebug_media = cached
            except AttributeError:  # a request class with slots: computed again next time
                pass
        return cached

    @staticmethod
    def name(request) -> str:
        """The name the client gave the request (qdebug_id), else '' (kept on the request: found once)."""
        cached = getattr(request, "_qdebug_name", None)
        if cached is None:
            params = getattr(request, "sampling_params", None)
            rid = str(getattr(request, "request_id", ""))
            name, _ = client_name(getattr(params, "extra_args", None), rid)
            cached = "" if name == rid else name
            try:
                request._qdebug_name = cached
            except AttributeError:  # a request class with slots: found again next time
                pass
        return cached

    # the hooks' work ---------------------------------------------------------------------------------------------
    def admitted(self, request) -> None:
        """A new request: its items the processor cache served, judged; the others are now processed by it."""
        start = time.perf_counter()
        params = getattr(request, "sampling_params", None)
        if params is None:
            return
        extra = dict(params.extra_args or {})
        extra.pop(READS_ARG, None)  # a client's own value is never taken
        doc = extra.get(MEDIA_ARG)
        raw = doc.get("processor") if isinstance(doc, dict) else None
        served: list = raw if isinstance(raw, list) else []
        media = self.media(request)
        rid, name = str(request.request_id), self.name(request)
        reads: list[dict] = []
        for item, feature in zip(media, getattr(request, "mm_features", None) or []):
            key = getattr(feature, "mm_hash", None) or getattr(feature, "identifier", None)
            if key is None:
                continue
            hit = served[item.index] if item.index < len(served) else None
            if hit:
                origin = self.processed.get(key)
                if origin is None:
                    read = CacheRead(CacheKind.PROCESSOR, rid, "", CacheReuse.UNVERIFIED, item.offset, item.end, item=item.index,
                                     reader_name=name, media=[item], why="no record of who processed this media hash")
                else:
                    who, who_name, theirs = origin
                    reuse, why = item_reuse(item, theirs)
                    read = CacheRead(CacheKind.PROCESSOR, rid, who, reuse, item.offset, item.end, item=item.index,
                                     origin_item=theirs.index, origin_start=theirs.offset, origin_end=theirs.end,
                                     reader_name=name, origin_name=who_name, media=[item], origin_media=[theirs], why=why)
                reads.append(read.to_json())
            else:
                self.processed[key] = (rid, name, item)
                self.processed.move_to_end(key)
                while len(self.processed) > PROCESSED:
                    self.processed.popitem(last=False)
        extra[READS_ARG] = reads
        params.extra_args = extra
        self._spent(start)

    def filled(self, request, blocks, first: int, last: int, block_size: int) -> None:
        """Blocks `first..last-1` of the request were just filled by it (cached for prefix reuse)."""
        start = time.perf_counter()
        tokens = getattr(request, "_all_token_ids", None) or list(request.all_token_ids)
        media, rid, name = self.media(request), str(request.request_id), self.name(request)
        for i in range(first, last):
            block = blocks[i]
            if getattr(block, "is_null", False):
                continue
            self.blocks[block.block_id] = BlockOrigin(rid, name, span_content(tokens, media, i * block_size, (i + 1) * block_size))
        self._spent(start)

    def served(self, request, hit_blocks, hit_tokens: int, external_tokens: int) -> None:
        """A request scheduled for the first time with `hit_tokens` prompt positions from the prefix cache (its
        `hit_blocks`, in order) and `external_tokens` more from a KV connector: each read judged, into its extra_args."""
        start = time.perf_counter()
        params = getattr(request, "sampling_params", None)
        if params is None:
            return
        tokens = getattr(request, "_all_token_ids", None) or list(request.all_token_ids)
        media, rid, name = self.media(request), str(request.request_id), self.name(request)
        size = hit_tokens // len(hit_blocks) if hit_blocks else 0
        spans = []
        for i, block in enumerate(hit_blocks):
            lo, hi = i * size, min((i + 1) * size, hit_tokens)
            if hi <= lo or getattr(block, "is_null", False):
                continue
            spans.append((span_content(tokens, media, lo, hi), self.blocks.get(block.block_id)))
        reads = [r.to_json() for r in merged_prefix_reads(rid, name, spans)]
        if external_tokens:
            lo, hi = hit_tokens, hit_tokens + external_tokens
            reads.append(CacheRead(CacheKind.CONNECTOR, rid, "", CacheReuse.UNVERIFIED, lo, hi, reader_name=name,
                                   media=[m for m in media if m.overlaps(lo, hi)],
                                   why="loaded by a KV connector: who computed it is not on record here").to_json())
        extra = dict(params.extra_args or {})
        extra[READS_ARG] = [*(r for r in (extra.get(READS_ARG) or []) if r.get("cache") != CacheKind.PREFIX), *reads]
        params.extra_args = extra
        self._spent(start)

    def _spent(self, start: float) -> None:
        self.seconds += time.perf_counter() - start
        self.calls += 1


LEDGER = CacheLedger()


def _guarded(what: str, fn, *args) -> None:
    """Run a ledger step; an exception is logged once per kind and never reaches the scheduler."""
    try:
        fn(*args)
    except Exception as exc:
        if what not in _FAILED:
            _FAILED.add(what)
            log.warning("qdebug: cache provenance: %s not recorded (%s: %s); the request is served as without the plugin",
                        what, type(exc).__name__, exc)


_FAILED: set[str] = set()


def patch_scheduler(module) -> None:
    """Wrap `Scheduler.add_request` (once), and time it, `schedule` and `update_from_output`: the scheduler's time the
    recording is a share of."""
    cls = getattr(module, "Scheduler", None)
    if cls is None or getattr(cls.add_request, "_qdebug", False):
        return
    original = cls.add_request

    def add_request(self, request, *args, **kwargs):
        start = time.perf_counter()
        try:
            _guarded("a new request's media", LEDGER.admitted, request)
            return original(self, request, *args, **kwargs)
        finally:
            LEDGER.scheduler_seconds += time.perf_counter() - start
            LEDGER.scheduler_calls += 1

    setattr(add_request, "_qdebug", True)
    setattr(cls, "add_request", add_request)
    for name in ("schedule", "update_from_output"):
        if callable(getattr(cls, name, None)):
            setattr(cls, name, _timed(getattr(cls, name)))


def _timed(method):
    """A scheduler method timed into LEDGER.scheduler_seconds (the first call starts core-<pid>.json)."""

    def timed(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return method(self, *args, **kwargs)
        finally:
            LEDGER.scheduler_seconds += time.perf_counter() - start
            LEDGER.scheduler_calls += 1
            if not LEDGER.published:
                _guarded("the engine core's clock file", LEDGER.publish)

    setattr(timed, "_qdebug", True)
    return timed


def read_core(folder: str) -> dict[str, float]:
    """The engine cores' recording and scheduler time summed over the `core-<pid>.json` files of a trace folder."""
    from .plugin_clock import read_clocks

    return read_clocks(folder, CORE_FILE, CORE_KEYS)


def patch_block_pool(module) -> None:
    """Wrap `BlockPool.cache_full_blocks` (once)."""
    cls = getattr(module, "BlockPool", None)
    if cls is None or getattr(cls.cache_full_blocks, "_qdebug", False):
        return
    original = cls.cache_full_blocks

    def cache_full_blocks(self, request, blocks, num_cached_blocks, num_full_blocks, block_size, *args, **kwargs):
        result = original(self, request, blocks, num_cached_blocks, num_full_blocks, block_size, *args, **kwargs)
        if num_full_blocks > num_cached_blocks:
            _guarded("a filled KV block", LEDGER.filled, request, blocks, num_cached_blocks, num_full_blocks, block_size)
        return result

    setattr(cache_full_blocks, "_qdebug", True)
    setattr(cls, "cache_full_blocks", cache_full_blocks)


def patch_kv_cache_manager(module) -> None:
    """Wrap `KVCacheManager.allocate_slots` (once): its prefix-cache arguments are read by name or by position."""
    cls = getattr(module, "KVCacheManager", None)
    if cls is None or getattr(cls.allocate_slots, "_qdebug", False):
        return
    import inspect

    original = cls.allocate_slots
    names = list(inspect.signature(original).parameters)[1:]  # after self

    def positional(name: str) -> int:
        return names.index(name) if name in names else 10**6

    at_hits, at_blocks, at_external = positional("num_new_computed_tokens"), positional("new_computed_blocks"), positional("num_external_computed_tokens")

    def allocate_slots(self, request, *args, **kwargs):
        result = original(self, request, *args, **kwargs)
        if result is not None and not getattr(request, "num_computed_tokens", 0):
            everything = (request, *args)
            hits = kwargs.get("num_new_computed_tokens", everything[at_hits] if at_hits < len(everything) else 0) or 0
            external = kwargs.get("num_external_computed_tokens", everything[at_external] if at_external < len(everything) else 0) or 0
            if hits or external:
                blocks = kwargs.get("new_computed_blocks", everything[at_blocks] if at_blocks < len(everything) else None)
                groups: tuple = getattr(blocks, "blocks", None) or ([],)
                _guarded("a prefix-cache read", LEDGER.served, request, list(groups[0]), int(hits), int(external))
        return result

    setattr(allocate_slots, "_qdebug", True)
    setattr(cls, "allocate_slots", allocate_slots)


PATCHES = {"vllm.v1.core.sched.scheduler": patch_scheduler, "vllm.v1.core.block_pool": patch_block_pool,
           "vllm.v1.core.kv_cache_manager": patch_kv_cache_manager}
