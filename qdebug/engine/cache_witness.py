"""Cache provenance in vLLM's worker: the encoder-cache reads, and every read of a request gathered in one place.

Where it listens: each step's `SchedulerOutput`, before the step runs (the tracer's step hook calls
`observe`). A new request brings its items (`mm_features`: identifier, placeholders), the fingerprints the front end
attached and the reads the engine core judged (prefix cache, processor cache: `extra_args`, engine/cache_core.py),
and how many prompt positions it starts with from the prefix cache. `scheduled_encoder_inputs` says which items the
step encodes and for whom: that request computed what the encoder cache then holds under the item's identifier. An
item whose placeholders a request computes without having had it encoded was served by the encoder cache, from
whoever's encoding holds that identifier: judged by the two items' fingerprints.

Bounded: a record per live request, and the last `ORIGINS` identifiers' encoders (freed ones dropped as vLLM frees
them: `free_encoder_mm_hashes`).

Cheap on the step: every read is kept as the JSON document the engine core sent (or `to_json` of an encoder-cache read
found here), parsed into a `CacheRead` only by whoever needs one (a traced request's trace, the watch's findings).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass, field

from qdebug.vocab import CacheKind

from .cache_reads import MAX_READS, CacheRead, MediaPrint, item_reuse, parsed_reads, prints_from_args, read_docs
from .request_names import client_name

log = logging.getLogger("vllm.qdebug")
ORIGINS = 8192


@dataclass
class _Live:
    """One request in flight: its items, the positions computed so far, the items it had encoded, its reads."""

    name: str
    media: list[MediaPrint]
    identifiers: list[str]
    computed: int  # prompt positions computed (or read from the prefix cache) so far
    cached_prefix: int  # prompt positions the prefix cache (or a KV connector) served at its first step
    pending: set[int] = field(default_factory=set)  # items whose placeholders are not yet computed
    encoded: set[int] = field(default_factory=set)
    reads: list[dict] = field(default_factory=list)  # each a CacheRead's JSON document


class CacheWitness:
    """The reads of every request on one model runner."""

    def __init__(self) -> None:
        self.live: dict[str, _Live] = {}
        self.origins: OrderedDict[str, tuple[str, str, MediaPrint]] = OrderedDict()  # identifier → who encoded it
        self.fresh: list[dict] = []  # the reads found by the last observe(), as documents (the watch's cache check reads them)
        self.done: dict[str, _Live] = {}  # the requests the last observed step says finished (kept for that step)
        self.last = None  # the SchedulerOutput last observed: observe() is idempotent per step
        self.waiting: set[str] = set()  # live requests with items whose placeholders are not yet computed

    def observe(self, out) -> list[dict]:
        """Take in one step before it runs; the reads it found (engine-core reads of new requests included), as
        documents (`parsed_reads` makes CacheReads of them)."""
        if out is self.last:
            return self.fresh
        self.last, self.fresh = out, []
        self.done = {rid: live for rid in getattr(out, "finished_req_ids", ()) or () if (live := self.live.pop(rid, None)) is not None}
        self.waiting.difference_update(self.done)
        for identifier in getattr(out, "free_encoder_mm_hashes", ()) or ():
            self.origins.pop(identifier, None)
        for new in getattr(out, "scheduled_new_reqs", ()) or ():
            self._new(new)
        for rid, indexes in (getattr(out, "scheduled_encoder_inputs", None) or {}).items():
            live = self.live.get(rid)
            if live is None:
                continue
            for i in indexes:
                if i < len(live.identifiers):
                    live.encoded.add(i)
                    self.origins[live.identifiers[i]] = (rid, live.name, live.media[i])
                    self.origins.move_to_end(live.identifiers[i])
            while len(self.origins) > ORIGINS:
                self.origins.popitem(last=False)
        tokens = getattr(out, "num_scheduled_tokens", None) or {}
        for rid in self.waiting.intersection(tokens) if self.waiting else ():  # a decode step: nothing to look at
            live = self.live[rid]
            end = live.computed + int(tokens[rid])
            for i in sorted(i for i in live.pending if live.media[i].offset < end):
                live.pending.discard(i)
                if i not in live.encoded:
                    self._served(rid, live, i)
            live.computed = end
            if not live.pending:
                self.waiting.discard(rid)
        return self.fresh

    def _new(self, new) -> None:
        """A request's first step: its items, the positions it starts with, the reads the engine core judged."""
        params = getattr(new, "sampling_params", None)
        extra = getattr(params, "extra_args", None)
        rid = str(new.req_id)
        name, _ = client_name(extra, rid)
        prints = prints_from_args(extra) or []
        features = [f for f in getattr(new, "mm_features", None) or []]
        media = [MediaPrint(i, str(f.modality), prints[i] if i < len(prints) else "", int(f.mm_position.offset), int(f.mm_position.length))
                 for i, f in enumerate(features)]
        start = int(getattr(new, "num_computed_tokens", 0) or 0)
        reads = read_docs(extra)
        live = _Live(name if name != rid else "", media, [str(f.identifier) for f in features], start, start,
                     pending={m.index for m in media if m.end > start and m.modality != "prompt_embeds"}, reads=reads)
        self.live[rid] = live
        if live.pending:
            self.waiting.add(rid)
        self.fresh.extend(reads)

    def _served(self, rid: str, live: _Live, index: int) -> None:
        """Item `index` of `rid` is computed without having been encoded for it: the encoder cache served it."""
        item = live.media[index]
        origin = self.origins.get(live.identifiers[index])
        if origin is None:
            return  # not in our record (encoded before the plugin attached, or evicted from it): said nowhere as a read
        who, who_name, theirs = origin
        if who == rid:
            return  # its own encoding, from an earlier chunk
        reuse, why = item_reuse(item, theirs)
        read = CacheRead(CacheKind.ENCODER, rid, who, reuse, item.offset, item.end, item=index, origin_item=theirs.index,
                         origin_start=theirs.offset, origin_end=theirs.end, reader_name=live.name, origin_name=who_name,
                         media=[item], origin_media=[theirs], why=why)
        doc = read.to_json()
        if len(live.reads) < MAX_READS:
            live.reads.append(doc)
        self.fresh.append(doc)

    def _record(self, rid: str) -> _Live | None:
        return self.live.get(rid) or self.done.get(rid)

    def reads(self, rid: str) -> list[CacheRead]:
        """Every read of a request in flight, or finished in the step last observed (engine core's first)."""
        return parsed_reads(self.read_docs(rid))

    def read_docs(self, rid: str) -> list[dict]:
        """The same reads as their JSON documents (what the batch log writes), unparsed."""
        live = self._record(rid)
        return list(live.reads) if live is not None else []

    def cached_prefix(self, rid: str) -> int:
        """The prompt positions request `rid` started with from the prefix cache or a KV connector."""
        live = self._record(rid)
        return live.cached_prefix if live is not None else 0

    def name(self, rid: str) -> str:
        """The name the client gave request `rid` ('' when none)."""
        live = self._record(rid)
        return live.name if live is not None else ""

    def close(self) -> dict[str, list[CacheRead]]:
        """At shutdown: every request still held, with its reads."""
        out = {rid: parsed_reads(live.reads) for rid, live in {**self.live, **self.done}.items()}
        self.live, self.done, self.waiting = {}, {}, set()
        return out
