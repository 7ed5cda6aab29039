"""What an engine trace says of its request's cache reads: every read (`meta.engine["cache_reads"]`), and the prompt
positions the prefix cache (or a KV connector) served instead of this run computing them (`meta.engine["cached_prefix"]`,
trace.cached), with who had computed them and whether from the same content; per media item, in words, how much of it
was served so."""

from __future__ import annotations

from qdebug.trace.cached import KEY, CachedPrefix
from qdebug.vocab import CacheKind, CacheReuse

from .cache_reads import CacheRead
from .requests import EngineRequest

_KV = (CacheKind.PREFIX, CacheKind.CONNECTOR)  # caches that serve prompt positions' KV
_CACHE_WORDS = {CacheKind.PREFIX: "the prefix cache", CacheKind.CONNECTOR: "a KV connector"}
_WORST = (CacheReuse.OTHER, CacheReuse.UNVERIFIED, CacheReuse.SAME)


def cache_meta(req: EngineRequest) -> dict:
    """The keys an engine trace's `meta.engine` gains from the request's cache reads (none when it read no cache)."""
    out: dict = {}
    if req.cache_reads:
        out["cache_reads"] = [r.to_json() for r in req.cache_reads]
    cached = prefix_served(req)
    if cached is not None:
        out[KEY] = cached.to_json()
    return out


def prefix_served(req: EngineRequest) -> CachedPrefix | None:
    """The prompt positions [0, N) this run did not compute (N: where its recording started), from the reads that say
    who computed them; None when it computed its whole prompt."""
    first = req.computed_from or 0
    if first <= 0:
        return None
    reads = _kv_reads(req, 0, first)
    reuse = next((w for w in _WORST if any(r.reuse == w for r in reads)), CacheReuse.UNVERIFIED)
    caches = tuple(dict.fromkeys(str(r.cache) for r in reads))
    origins = tuple(dict.fromkeys(r.who() for r in reads))
    if reads:
        how = "; ".join(_read_words(r) for r in reads)
        said = f"prompt positions 0..{first - 1} were not computed in this run: {how}"
    else:
        said = (f"prompt positions 0..{first - 1} were not computed in this run: the engine served them from its prefix cache "
                "or a KV connector, with no record of who computed them")
    return CachedPrefix(first, caches, origins, str(reuse), said)


def served_items(req: EngineRequest, indexes: list[int]) -> tuple[dict[int, str], set[int]]:
    """For the request's features at `indexes` (numbered 0.. in that order): (item → how the positions it did not
    compute were served, in words, for every item with a placeholder before where the run started; the items with
    none computed)."""
    first = req.computed_from or 0
    words: dict[int, str] = {}
    whole: set[int] = set()
    for k, i in enumerate(indexes):
        feat = req.features[i]
        start, end = feat.offset, feat.offset + feat.length
        if start >= first:
            continue
        upto = min(end, first)
        reads = _kv_reads(req, start, upto)
        cache = " and ".join(dict.fromkeys(_CACHE_WORDS.get(r.cache, str(r.cache)) for r in reads)) or "the prefix cache"
        who = ", ".join(dict.fromkeys(f"{r.who()} ({_reuse_words(r)})" for r in reads)) or "no one on record"
        if end <= first:
            whole.add(k)
            words[k] = f"served whole from {cache} (positions {start}..{end - 1}), computed by {who}"
        else:
            words[k] = f"its first {upto - start} of {end - start} placeholders (positions {start}..{upto - 1}) served from {cache}, computed by {who}"
    return words, whole


def _kv_reads(req: EngineRequest, start: int, end: int) -> list[CacheRead]:
    """The request's prefix-cache and KV-connector reads over positions [start, end), in order."""
    return sorted((r for r in req.cache_reads if r.cache in _KV and r.start < end and start < r.end), key=lambda r: r.start)


def _read_words(read: CacheRead) -> str:
    """One read of KV as a trace says it: which cache served which positions, computed by whom, from what."""
    said = f"{_CACHE_WORDS.get(read.cache, str(read.cache))} served {read.what()}, computed by {read.who()} ({_reuse_words(read)})"
    if read.reuse != CacheReuse.SAME and read.why:
        said += f": {read.why}"
    return said


def _reuse_words(read: CacheRead) -> str:
    """`same content`, `other content`, `unverified`."""
    return str(read.reuse).replace("_", " ")
