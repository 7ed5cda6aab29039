"""What every view of an endpoint report says about the server's caches, one wording: the `reused` cell of a request
(the range a cache served it from another's content, or its reads of its own content) and the report's cache lines."""

from __future__ import annotations

from qdebug.shown import shown
from qdebug.vocab import CacheReuse


def has_cache_column(report) -> bool:
    """Whether the report read the engine's cache records (then its requests table has a `reused` column)."""
    return bool(((getattr(report, "extra", None) or {}).get("cache_provenance") or {}).get("read"))


def reused_cell(r) -> str:
    """The range behind a cache verdict (`image item 0 (positions 3..66)`), else the request's reads of its own content
    (`same: prefix_cache 64 positions ← req-02 +1`), else "–"."""
    if r.cache_read:
        return shown(r.cache_read.get("what", ""), 80)
    same = [c for c in r.cache_reads or [] if c.get("reuse") == CacheReuse.SAME]
    if not same:
        return "–"
    first = same[0]
    size = f"{first['positions']} positions" if first.get("item") is None else f"item {first['item']}"
    donor = shown(first["donor"], 40) + (f" ({first['donor_phase']})" if first.get("donor_phase") else "")
    return f"same: {first['cache']} {size} ← {donor}" + (f" +{len(same) - 1}" if len(same) > 1 else "")


def cache_lines(report) -> list[str]:
    """The report's lines about caches: what each phase did (`engine_caches_said`) and the provenance read
    (`cache_provenance.said`), as written in its JSON."""
    extra = getattr(report, "extra", None) or {}
    return [shown(s, 600) for s in (extra.get("engine_caches_said"), (extra.get("cache_provenance") or {}).get("said")) if s]
