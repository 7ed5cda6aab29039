"""Measured sync offsets: where each image's visual rows actually landed in the embeddings the decoder received.

Evidence only: the offsets come from comparing the decoder's input rows with every request's isolated encoder
rows, never from what a fault or a sync event says about itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from qdebug.trace.items import trace_items
from qdebug.trace.tensor_names import TensorKind as T

if TYPE_CHECKING:
    from torch import Tensor

SAME_ROWS = 1 - 1e-4  # mean cosine at which a block of rows counts as the same encoder rows


@dataclass
class Candidate:
    """One image's isolated encoder rows (`n × dim`) and whose they are."""

    request_id: str
    image: int
    rows: Tensor


def media_spans(trace) -> list[tuple[int, tuple[int, int]]]:
    """(item, placeholder span) of every media item: images, videos and audio clips, an Omni trace's all three (the
    item is the index its encoder rows are saved under)."""
    return [(it.item, it.span) for it in trace_items(trace) if it.span]


def candidates_from_references(references: dict) -> list[Candidate]:
    """Every image (or audio clip) of every isolated reference trace, as Candidates."""
    out = []
    for rid, trace in references.items():
        for index, _span in media_spans(trace):
            rows = trace.tensor_or_none(T.ENCODE, item=index)
            if rows is not None:
                out.append(Candidate(rid, index, rows))
    return out


def block_offset(rows, seq, min_overlap: float = 0.5) -> tuple[int | None, float]:
    """Where the block `rows` (n × dim) best lines up in `seq` (L × dim), allowing it to hang off either end.

    Returns (offset, mean cosine over the overlapping rows); at least `min_overlap` of the rows must overlap,
    so a block pushed partly past the sequence (rows dropped) is still found at its real offset.
    """
    import torch

    n, length = rows.shape[0], seq.shape[0]
    if n == 0 or length == 0:
        return None, 0.0
    need = max(1, min(n, length, math.ceil(n * min_overlap)))
    sim = torch.nn.functional.normalize(rows.float(), dim=-1) @ torch.nn.functional.normalize(seq.float(), dim=-1).T  # n × L
    # Sum every diagonal at once (offsets -lead .. length-need) with a strided view over a zero-padded copy, then
    # divide by how many rows of the block overlap the sequence at that offset.
    lead = n - need
    padded = torch.nn.functional.pad(sim, (lead, n)).contiguous()
    count_offsets = lead + length - need + 1
    diag = padded.as_strided((n, count_offsets), (padded.stride(0) + 1, 1))
    offsets = torch.arange(-lead, length - need + 1)
    overlap = torch.minimum(torch.full_like(offsets, n), length - offsets) - torch.clamp(-offsets, min=0)
    score = diag.sum(0) / overlap.clamp(min=1)
    best = int(score.argmax())
    return int(offsets[best]), max(float(score[best]), 0.0)


def measure_image(seq, span: tuple[int, int], own_id: str, image: int, candidates: list[Candidate]) -> dict:
    """One image of one stream: its text offset, the measured visual offset, its row count and whose rows it got.

    The image's own rows are looked for first; when they are not in the stream, the candidate block that lies
    nearest the placeholder span names the donor. Without any whole block, rows are matched one by one and the
    request most of the span's rows came from is the donor (visual offset unknown: a mix).
    """
    import torch

    start, end = span
    own = next((c for c in candidates if c.request_id == own_id and c.image == image), None)
    entry: dict[str, Any] = {"index": image, "text_offset": start, "visual_offset": None, "rows": end - start, "donor": None, "match": 0.0}
    if seq is None:
        return entry
    if own is not None:
        off, score = block_offset(own.rows, seq)
        if score >= SAME_ROWS:
            entry.update(visual_offset=off, match=round(score, 6))
            return entry
    found = []
    for c in candidates:
        if c is own or c.rows.shape[0] != end - start:
            continue
        at, score = block_offset(c.rows, seq)
        if at is not None and score >= SAME_ROWS:
            found.append((abs(at - start), c.request_id == own_id, at, score, c))
    if found:
        _, _, off, score, c = min(found, key=lambda f: (f[0], not f[1]))
        entry.update(visual_offset=off, match=round(score, 6), donor=None if c.request_id == own_id else c.request_id)
        return entry
    window = seq[start:end]
    if window.shape[0] == 0 or not candidates:
        return entry
    every = torch.cat([c.rows for c in candidates]).float()
    owners = [c.request_id for c in candidates for _ in range(c.rows.shape[0])]
    sim = torch.nn.functional.normalize(window.float(), dim=-1) @ torch.nn.functional.normalize(every, dim=-1).T
    best, idx = sim.max(dim=1)
    counts: dict[str, int] = {}
    for s, i in zip(best.tolist(), idx.tolist()):
        if s >= SAME_ROWS and owners[i] != own_id:
            counts[owners[i]] = counts.get(owners[i], 0) + 1
    if counts:
        entry["donor"] = max(counts, key=lambda k: (counts[k], k))
    entry["match"] = round(float(best.mean()), 6)
    return entry


def measure_stream(seq, spans: list[tuple[int, tuple[int, int]]], own_id: str, candidates: list[Candidate]) -> list[dict]:
    """`measure_image` for every (image index, placeholder span) of one stream, in order."""
    return [measure_image(seq, span, own_id, i, candidates) for i, span in spans]
