"""The numbers a log index stores for words: its version, verdict codes, event kind codes; and its files' codec."""

from __future__ import annotations

from qdebug.vocab import ENDPOINT_VERDICTS, EVENT_KINDS, VERDICT_RANK, EventKind, Verdict

# Bump when the parser or the tables change: an index built by another version is rebuilt, never misread.
INDEX_VERSION = 4
# Every Parquet file of an index (events, requests, findings) is compressed with it; readers take any codec, so an
# index written with another (zstd, before) is read as it is.
INDEX_CODEC = "snappy"
# A request's stored verdict code (column `rank`): its place in vocab.VERDICT_RANK among the verdicts a log can
# give (never `diverged` nor an endpoint's own verdicts), so SQL's max() and ORDER BY rank keep the shared ranking. On disk: ok 0, error 1, desync 2, contaminated 3.
VERDICT_OF_CODE = tuple(v for v in sorted(VERDICT_RANK, key=VERDICT_RANK.__getitem__) if v != Verdict.DIVERGED and v not in ENDPOINT_VERDICTS)
CODE_OF_VERDICT: dict[Verdict, int] = {v: code for code, v in enumerate(VERDICT_OF_CODE)}


def verdict_code(verdict: Verdict) -> int:
    """A verdict's stored code."""
    return CODE_OF_VERDICT[verdict]


def kind_code(kind: EventKind) -> int:
    """An event kind's stored code: its place in vocab.EVENT_KINDS (append new kinds, so codes never move)."""
    return EVENT_KINDS.index(kind)
