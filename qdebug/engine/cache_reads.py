"""Cache provenance, as plain data: which of a request's prompt positions or media items an engine served from a
cache instead of computing them, which earlier request computed what was served, and whether it was computed from
the same content (qdebug's own fingerprints of what each client sent, never the engine's hashes, uuids or block keys:
the bug this finds is exactly those keys being wrong).

Written by the plugin in vLLM's processes (front end: each item's fingerprint and whether the processor cache served
it; engine core: prefix-cache reads and who cached each block; worker: encoder-cache reads), carried to the worker in
the request's `sampling_params.extra_args` (`MEDIA_ARG`, `READS_ARG`; a client's own values there are replaced), and
read by the watch's `cache` check, engine traces (`meta.engine["cache_reads"]`) and replay. No vLLM import here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from qdebug.vocab import CacheKind, CacheReuse

MEDIA_ARG = "qdebug_media"  # extra_args key: {"prints": [fingerprint per item], "processor": [origin|None per item]}
READS_ARG = "qdebug_cache_reads"  # extra_args key: [CacheRead.to_json(), ...] judged before the request's first step
PRINT_CHARS = 16  # a fingerprint: 64 bits of BLAKE2b, as hex
MAX_READS = 64  # reads kept per request (prefix reads are merged into runs of blocks first)
MAX_NAME = 200  # characters of a request name kept in a read (ids are the client's)
UNKNOWN = ""  # an item whose content qdebug did not see (sent as embeddings, or by uuid alone)


def fingerprint(data: object) -> str:
    """qdebug's fingerprint of one media item's decoded content: a PIL image's mode, size and pixels, an array's
    dtype, shape and bytes (a video's frames, an audio clip's samples, with its rate when given as `(samples, rate)`);
    "" for what carries no content (None)."""
    if data is None:
        return UNKNOWN
    h = hashlib.blake2b(digest_size=PRINT_CHARS // 2)
    _feed(h, data)
    return h.hexdigest()


def _feed(h, data: object) -> None:
    """Put one value into the hash, by what it is (never by repr of an object: addresses would differ per run)."""
    if hasattr(data, "tobytes") and hasattr(data, "mode") and hasattr(data, "size"):  # a PIL image
        h.update(f"image:{data.mode}:{data.size}".encode())
        h.update(data.tobytes())
    elif hasattr(data, "detach") and hasattr(data, "cpu"):  # a torch tensor
        _feed(h, data.detach().cpu().contiguous().numpy())
    elif hasattr(data, "dtype") and hasattr(data, "shape") and hasattr(data, "tobytes"):  # a numpy array
        h.update(f"array:{data.dtype}:{tuple(data.shape)}".encode())
        h.update(data.tobytes())
    elif isinstance(data, (bytes, bytearray, memoryview)):
        h.update(b"bytes:")
        h.update(bytes(data))
    elif isinstance(data, dict):
        h.update(f"dict:{len(data)}".encode())
        for key in sorted(data, key=str):
            h.update(f"{key}=".encode())
            _feed(h, data[key])
    elif isinstance(data, (list, tuple)):
        h.update(f"seq:{len(data)}".encode())
        for value in data:
            _feed(h, value)
    else:  # numbers, strings, None inside a container: a video's fps, an audio clip's rate
        h.update(f"{type(data).__name__}:{data!r}".encode())


@dataclass(frozen=True)
class MediaPrint:
    """One media item of a request as qdebug saw it: its index in the request, modality, fingerprint and the prompt
    positions of its placeholders (`offset`, `length`)."""

    index: int
    modality: str
    fingerprint: str
    offset: int
    length: int

    @property
    def end(self) -> int:
        """One past its last placeholder position."""
        return self.offset + self.length

    def overlaps(self, start: int, end: int) -> bool:
        """Whether any of its placeholders lies in positions [start, end)."""
        return self.offset < end and start < self.end

    def to_json(self) -> dict:
        return {"index": self.index, "modality": self.modality, "fingerprint": self.fingerprint, "offset": self.offset,
                "length": self.length}

    @classmethod
    def from_json(cls, doc: dict) -> "MediaPrint":
        return cls(int(doc["index"]), str(doc["modality"]), str(doc.get("fingerprint") or ""), int(doc["offset"]), int(doc["length"]))


def short(fp: str) -> str:
    """A fingerprint as shown in words: its first 8 hex digits, or `unseen`."""
    return fp[:8] if fp else "unseen"


@dataclass
class CacheRead:
    """One read: `reader`'s prompt positions [start, end) (an item cache: the item's placeholders) were served by
    `cache` from what `origin` computed (at its positions [origin_start, origin_end), its item `origin_item`), and
    `reuse` says whether that was computed from the same content (`why` says how it was told)."""

    cache: CacheKind
    reader: str
    origin: str  # "" when no one is on record as having computed it
    reuse: CacheReuse
    start: int
    end: int
    item: int | None = None  # the reader's item (item caches)
    origin_item: int | None = None
    origin_start: int | None = None
    origin_end: int | None = None
    reader_name: str = ""  # the client's qdebug_id, when it gave one
    origin_name: str = ""
    media: list[MediaPrint] = field(default_factory=list)  # the reader's items in the range
    origin_media: list[MediaPrint] = field(default_factory=list)  # the origin's items in its range
    why: str = ""

    @property
    def positions(self) -> int:
        """How many prompt positions it served."""
        return max(self.end - self.start, 0)

    @property
    def wrong(self) -> bool:
        """Whether another request's content was served (the incident this records)."""
        return self.reuse == CacheReuse.OTHER

    def who(self) -> str:
        """The origin as a user knows it: its qdebug_id (or client name) when it had one, else the engine's id."""
        return self.origin_name or self.origin or "no one on record"

    def what(self) -> str:
        """What was read, in words: `positions 0..95` or `image item 0 (positions 12..75)`."""
        span = f"positions {self.start}..{self.end - 1}" if self.end > self.start else "no positions"
        if self.item is None:
            return span
        modality = next((m.modality for m in self.media if m.index == self.item), "media")
        return f"{modality} item {self.item} ({span})"

    def to_json(self) -> dict:
        return {"cache": str(self.cache), "reader": self.reader, "reader_name": self.reader_name, "origin": self.origin,
                "origin_name": self.origin_name, "reuse": str(self.reuse), "start": self.start, "end": self.end,
                "item": self.item, "origin_item": self.origin_item, "origin_start": self.origin_start,
                "origin_end": self.origin_end, "media": [m.to_json() for m in self.media],
                "origin_media": [m.to_json() for m in self.origin_media], "why": self.why}

    @classmethod
    def from_json(cls, doc: dict) -> "CacheRead":
        """A read from its JSON (ValueError/KeyError/TypeError on a malformed one: the caller says which)."""
        return cls(cache=CacheKind(doc["cache"]), reader=_name(doc["reader"]), origin=_name(doc.get("origin") or ""),
                   reuse=CacheReuse(doc["reuse"]), start=int(doc["start"]), end=int(doc["end"]),
                   item=_int_or_none(doc.get("item")), origin_item=_int_or_none(doc.get("origin_item")),
                   origin_start=_int_or_none(doc.get("origin_start")), origin_end=_int_or_none(doc.get("origin_end")),
                   reader_name=_name(doc.get("reader_name") or ""), origin_name=_name(doc.get("origin_name") or ""),
                   media=[MediaPrint.from_json(m) for m in doc.get("media") or []][:MAX_READS],
                   origin_media=[MediaPrint.from_json(m) for m in doc.get("origin_media") or []][:MAX_READS],
                   why=str(doc.get("why") or "")[:600])


def _int_or_none(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]


def _name(value: object) -> str:
    return str(value)[:MAX_NAME]


# --- judging --------------------------------------------------------------------------------------------------------
def item_reuse(mine: MediaPrint | None, theirs: MediaPrint | None) -> tuple[CacheReuse, str]:
    """An item served from what another request's item computed: the same content when both fingerprints are known
    and equal (and the item is as long: the same number of placeholders)."""
    if mine is None or theirs is None or not mine.fingerprint or not theirs.fingerprint:
        side = "this request's" if mine is None or not mine.fingerprint else "the origin's"
        return CacheReuse.UNVERIFIED, f"{side} item was not seen by qdebug (no fingerprint)"
    if mine.fingerprint != theirs.fingerprint:
        return CacheReuse.OTHER, (f"{mine.modality} item {mine.index} has fingerprint {short(mine.fingerprint)}; what was served "
                                  f"was computed from {theirs.modality} item {theirs.index} of fingerprint {short(theirs.fingerprint)}")
    if mine.length != theirs.length:
        return CacheReuse.OTHER, f"item {mine.index} has {mine.length} placeholders; the origin's had {theirs.length}"
    return CacheReuse.SAME, f"same {mine.modality} content (fingerprint {short(mine.fingerprint)})"


class SpanContent(NamedTuple):
    """What a run of prompt positions [start, end) was computed from: a digest of its token ids and, for each media
    item with placeholders in it, (fingerprint, modality, the part of the item covered). Two requests' KV over the
    same positions is the same when their SpanContents are equal (and nothing in either is unseen). A named tuple:
    the engine core makes one per KV block it records or reads, in the scheduler's time."""

    start: int
    end: int
    tokens: int  # our digest of the token ids (hash of a tuple of ints: stable within the process that compares)
    media: tuple[tuple[str, str, int, int], ...]  # (fingerprint, modality, first covered, last covered + 1) relative to the item
    prints: tuple[MediaPrint, ...]  # the items themselves, for the words

    @property
    def seen(self) -> bool:
        """Whether every item in it has a fingerprint."""
        return all(fp for fp, _, _, _ in self.media)


def span_content(tokens: Sequence[int], media: Iterable[MediaPrint], start: int, end: int) -> SpanContent:
    """The content of positions [start, end) of a request with these token ids and items."""
    inside = tuple(m for m in media if m.overlaps(start, end))
    parts = tuple((m.fingerprint, m.modality, max(start, m.offset) - m.offset, min(end, m.end) - m.offset) for m in inside)
    return SpanContent(start, end, hash(tuple(tokens[start:end])), parts, inside)


def span_reuse(mine: SpanContent, theirs: SpanContent) -> tuple[CacheReuse, str]:
    """Positions served from KV that another request computed: the same content when token ids and every item
    overlapping them (content and the part of it covered) are the same; otherwise what differs, in words."""
    if mine.tokens != theirs.tokens:
        return CacheReuse.OTHER, f"token ids differ at positions {mine.start}..{mine.end - 1}"
    if len(mine.media) != len(theirs.media) or any(a[1:] != b[1:] for a, b in zip(mine.media, theirs.media)):
        return CacheReuse.OTHER, f"media placeholders differ at positions {mine.start}..{mine.end - 1}"
    if not mine.seen or not theirs.seen:
        return CacheReuse.UNVERIFIED, f"positions {mine.start}..{mine.end - 1} hold media qdebug did not see (no fingerprint)"
    for a, b, pa, pb in zip(mine.media, theirs.media, mine.prints, theirs.prints):
        if a[0] != b[0]:
            return CacheReuse.OTHER, (f"positions {mine.start}..{mine.end - 1} hold {pa.modality} item {pa.index} of fingerprint "
                                      f"{short(pa.fingerprint)}; the KV served was computed from {pb.modality} item {pb.index} "
                                      f"of fingerprint {short(pb.fingerprint)}")
    return CacheReuse.SAME, "same token ids" + (" and media" if mine.media else "")


@dataclass
class BlockOrigin:
    """Who computed one cached KV block, and from what (kept by the engine core per block until it is cached again)."""

    origin: str
    origin_name: str
    content: SpanContent


def merged_prefix_reads(reader: str, reader_name: str, blocks: Iterable[tuple[SpanContent, BlockOrigin | None]]) -> list[CacheRead]:
    """One read per run of consecutive blocks served from one origin and judged alike (its `why` is the run's first
    block's: where the content first differs); `blocks` is, per hit block in order, the reader's content over it and
    who computed it (None: no record)."""
    out: list[CacheRead] = []
    for mine, origin in blocks:
        theirs = origin.content if origin is not None else None
        if origin is None or theirs is None:
            reuse, why, who, name = CacheReuse.UNVERIFIED, "no record of who computed these blocks", "", ""
        else:
            (reuse, why), who, name = span_reuse(mine, theirs), origin.origin, origin.origin_name
        last = out[-1] if out else None
        if last is not None and last.origin == who and last.reuse == reuse and last.end == mine.start:
            last.end = last.origin_end = mine.end
            last.media = _union(last.media, mine.prints)
            last.origin_media = _union(last.origin_media, theirs.prints if theirs else ())
            continue
        out.append(CacheRead(CacheKind.PREFIX, reader, who, reuse, mine.start, mine.end, origin_start=mine.start,
                             origin_end=mine.end, reader_name=reader_name, origin_name=name, media=list(mine.prints),
                             origin_media=list(theirs.prints) if theirs else [], why=why))
    return out[:MAX_READS]


def _union(have: list[MediaPrint], more: Iterable[MediaPrint]) -> list[MediaPrint]:
    seen = {m.index for m in have}
    return [*have, *(m for m in more if m.index not in seen)]


def reads_from_args(extra_args: object) -> list[CacheRead]:
    """The reads the engine core judged for a request, from its extra_args (what cannot be read is left out)."""
    return parsed_reads(read_docs(extra_args))


def read_docs(extra_args: object) -> list[dict]:
    """The engine core's reads of a request as the JSON documents it sent (only dicts; parsed where needed)."""
    docs = extra_args.get(READS_ARG) if isinstance(extra_args, dict) else None
    return [d for d in docs[:MAX_READS] if isinstance(d, dict)] if isinstance(docs, list) else []


def parsed_reads(docs: Iterable[dict]) -> list[CacheRead]:
    """CacheReads from their documents (what cannot be read is left out)."""
    out = []
    for doc in docs:
        try:
            out.append(CacheRead.from_json(doc))
        except (KeyError, ValueError, TypeError, AttributeError):
            continue
    return out[:MAX_READS]


def wrong_doc(doc: dict) -> bool:
    """Whether a read's document says another request's content was served (without parsing the rest of it)."""
    return doc.get("reuse") == CacheReuse.OTHER


def prints_from_args(extra_args: object) -> list[str] | None:
    """Each item's fingerprint as the front end computed it (in the request's item order), or None when the front end
    sent none (its plugin not loaded, or a text request)."""
    doc = extra_args.get(MEDIA_ARG) if isinstance(extra_args, dict) else None
    prints = doc.get("prints") if isinstance(doc, dict) else None
    if not isinstance(prints, list):
        return None
    return [p if isinstance(p, str) and len(p) <= 64 else UNKNOWN for p in prints]


def summary(reads: Sequence[CacheRead]) -> dict:
    """Per cache: reads, positions served and how many were another's content (a trace's and a report's summary)."""
    out: dict = {}
    for r in reads:
        row = out.setdefault(str(r.cache), {"reads": 0, "positions": 0, "items": 0, "other_content": 0, "unverified": 0})
        row["reads"] += 1
        row["positions"] += r.positions
        row["items"] += 1 if r.item is not None else 0
        row["other_content"] += 1 if r.reuse == CacheReuse.OTHER else 0
        row["unverified"] += 1 if r.reuse == CacheReuse.UNVERIFIED else 0
    return out
