"""Prompt positions an engine served from a cache instead of computing them in the traced run (a prefix-cache hit):
what a trace says of them (`meta.engine["cached_prefix"]`) and where its computed rows start.

An engine trace whose request read its first N prompt positions from vLLM's prefix cache (or a KV connector) holds
rows for positions N.. only: its `sync` embeddings and position ids and every `layer.N` tensor have T - N rows, row k
being position N + k. A trace without the key (local traces, whole engine traces, traces written before it) holds
every position. The key, as the engine writes it:
`{"positions": [0, N], "caches": [...], "origins": [...], "reuse": "same_content|other_content|unverified", "said": "..."}`.
"""

from __future__ import annotations

from dataclasses import dataclass

KEY = "cached_prefix"  # meta.engine's key


@dataclass(frozen=True)
class CachedPrefix:
    """Prompt positions [0, end) that were not computed in the traced run: which caches served them (CacheKind values),
    who had computed them (the client's qdebug_id or the engine's id; "" for no one on record), whether from the same
    content (the worst of the reads: a CacheReuse value), in words."""

    end: int
    caches: tuple[str, ...] = ()
    origins: tuple[str, ...] = ()
    reuse: str = ""
    said: str = ""

    def to_json(self) -> dict:
        """As `meta.engine["cached_prefix"]`."""
        return {"positions": [0, self.end], "caches": list(self.caches), "origins": list(self.origins), "reuse": self.reuse,
                "said": self.said}

    def words(self) -> str:
        """The trace's own sentence (or one made from the positions when it has none)."""
        return self.said or f"prompt positions 0..{self.end - 1} were not computed in this run (served from a cache)"


def cached_prefix(trace) -> CachedPrefix | None:
    """What the trace says of the prompt positions served from a cache (None: it holds every position). A saved trace's
    key is checked when it is read (trace_schema)."""
    engine = getattr(trace.meta, "engine", None)
    doc = engine.get(KEY) if isinstance(engine, dict) else None
    if not isinstance(doc, dict):
        return None
    positions = doc.get("positions")
    end = positions[1] if isinstance(positions, list) and len(positions) == 2 and isinstance(positions[1], int) else 0
    if end <= 0:
        return None
    return CachedPrefix(int(end), _strings(doc, "caches"), _strings(doc, "origins"), str(doc.get("reuse") or ""), str(doc.get("said") or ""))


def _strings(doc: dict, key: str) -> tuple[str, ...]:
    """The strings of a list under `key` (anything else left out)."""
    value = doc.get(key)
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


def computed_from(trace) -> int:
    """The first prompt position whose rows the trace holds: 0 for a whole trace, N after a prefix-cache hit of N."""
    cached = cached_prefix(trace)
    return cached.end if cached is not None else 0


def computed_positions(trace, positions: list[int]) -> tuple[list[int], list[int]]:
    """Of `positions` (prompt positions, in order): (the indexes into `positions` of those the run computed, the rows
    of the trace's sync/layer tensors that hold them)."""
    first = computed_from(trace)
    kept = [(k, p - first) for k, p in enumerate(positions) if p >= first]
    return [k for k, _ in kept], [r for _, r in kept]


def schema_problem(engine: object, prompt: int) -> str | None:
    """What is wrong with a saved trace's `meta.engine.cached_prefix` (None when it is absent or well formed): its
    positions must be [0, N] with 0 < N < the prompt's length (an engine computes the last position), its lists lists of strings, its words a string."""
    doc = engine.get(KEY) if isinstance(engine, dict) else None
    if doc is None:
        return None
    where = f"meta.engine.{KEY}"
    if not isinstance(doc, dict):
        return f"{where}: expected an object"
    positions = doc.get("positions")
    if (not isinstance(positions, list) or len(positions) != 2 or positions[0] != 0 or not isinstance(positions[1], int)
            or isinstance(positions[1], bool) or not 0 < positions[1] < prompt):
        return f"{where}.positions: expected [0, N] with 0 < N < {prompt} (the prompt's length)"
    for key in ("caches", "origins"):
        value = doc.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return f"{where}.{key}: expected a list of strings"
    for key in ("reuse", "said"):
        if not isinstance(doc.get(key, ""), str):
            return f"{where}.{key}: expected a string"
    return None
