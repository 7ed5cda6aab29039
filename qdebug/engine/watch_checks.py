"""The watch's cheap checks, on one scheduler step's tensors (every request, every step):

- `placement`: the decoder's input rows at each request's placeholder positions computed in this step are its own
  encoder rows (vLLM's encoder cache, the source the merge reads); rows that are not are attributed, row by row, to the
  live request whose encoder rows they are (its donor), to its own rows from elsewhere, or to no one;
- `counts`: per item, the placeholder tokens in the prompt == the encoder rows == the grid's count (t·h·w / merge²).

Rows are compared through a fixed random projection (`PROJECTION_DIM` numbers per row): a few multiply-adds per row
instead of a copy, and two rows that differ anywhere differ in their projection (with probability 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field

PROJECTION_DIM = 8
SAME = 1e-3  # relative distance under which two projected rows are the same row (a copy is exact; bf16 recasts stay inside)
_GRID_KEYS = {"image": "image_grid_thw", "video": "video_grid_thw"}


@dataclass
class Item:
    """One multimodal item of a live request: its encoder-cache key, placeholder range and embed positions."""

    index: int
    modality: str
    identifier: str
    offset: int
    length: int
    embeds: list[int]  # prompt positions that take an encoder row, in row order
    grid: tuple[int, ...] | None


@dataclass
class Placement:
    """What one item's rows in one step were: how many were compared, and the owners of those that were not its own."""

    request_id: str
    item: int
    compared: int
    wrong: int = 0  # rows that are not this item's own rows at their own positions
    donors: dict[str, int] = field(default_factory=dict)  # other request → rows of its encoder output found here
    shifted: int = 0  # its own encoder rows, at the wrong positions
    unmatched: int = 0  # rows no live request's encoder produced


def items_of(state) -> list[Item]:
    """A request's multimodal items as vLLM's worker holds them (`CachedRequestState.mm_features`)."""
    out = []
    for index, spec in enumerate(getattr(state, "mm_features", None) or []):
        pos = spec.mm_position
        offset, length = int(pos.offset), int(pos.length)
        mask = getattr(pos, "is_embed", None)
        embeds = list(range(offset, offset + length)) if mask is None else [offset + int(i) for i in mask.nonzero().flatten().tolist()]
        out.append(Item(index, str(spec.modality), str(spec.identifier), offset, length, embeds, _grid(spec)))
    return out


def _grid(spec) -> tuple[int, ...] | None:
    data = getattr(spec, "data", None)
    key = _GRID_KEYS.get(str(spec.modality))
    try:
        if data is not None and key and key in data:
            return tuple(int(x) for x in data[key].data.reshape(-1).tolist())
    except (AttributeError, TypeError, KeyError):
        return None
    return None


def projection(dim: int, device, seed: int = 20261204):
    """The fixed [dim, PROJECTION_DIM] random matrix rows are projected with (float32, on the rows' device)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    return torch.randn(dim, PROJECTION_DIM, generator=gen).to(device)


def project(rows, matrix):
    """Rows [n, dim] → [n, PROJECTION_DIM] float32."""
    return rows.float() @ matrix


def same_rows(a, b):
    """Per row of two projected blocks [n, k]: whether they are the same row."""
    return (a - b).norm(dim=-1) <= SAME * b.norm(dim=-1) + 1e-6


def step_positions(item: Item, computed: int, scheduled: int) -> tuple[list[int], list[int]]:
    """The item's embed positions computed in this step (prompt positions [computed, computed + scheduled)): their
    offsets in the step's rows of this request, and their encoder row numbers."""
    rows, enc = [], []
    end = computed + scheduled
    for j, p in enumerate(item.embeds):
        if computed <= p < end:
            rows.append(p - computed)
            enc.append(j)
    return rows, enc


def check_placement(rid: str, item: Item, landed, own, others) -> Placement:
    """Compare one item's landed rows (projected, [n, k]) with its own encoder rows at the same row numbers (`own`,
    projected, [n, k]); rows that differ are looked up in `others()` (a callable giving (owners, projected encoder
    rows) of every live item, built only when needed: an item several requests share, the same content, has several
    owners, each named)."""
    import torch

    result = Placement(rid, item.index, int(landed.shape[0]))
    ok = same_rows(landed, own)
    if bool(ok.all()):
        return result
    bad = landed[~ok]
    result.wrong = int(bad.shape[0])
    candidates = others()
    left = torch.ones(bad.shape[0], dtype=torch.bool, device=bad.device)
    for owners, rows in candidates:
        if not bool(left.any()) or rows.shape[0] == 0:
            break
        dist = torch.cdist(bad[left], rows)  # [bad, candidate rows]
        close = (dist <= SAME * rows.norm(dim=-1)[None] + 1e-6).any(dim=-1)
        if bool(close.any()):
            hits = int(close.sum())
            if rid in owners:
                result.shifted += hits
            else:
                for owner in owners:
                    result.donors[owner] = result.donors.get(owner, 0) + hits
            idx = left.nonzero().flatten()[close]
            left[idx] = False
    result.unmatched = int(left.sum())
    return result


def check_counts(item: Item, prompt_ids, token_id: int | None, encoder_rows: int, merge: int) -> str | None:
    """Why one item's counts disagree (placeholder tokens, encoder rows, the grid's count), or None when they agree."""
    placeholders = len(item.embeds)
    if token_id is not None and prompt_ids is not None:
        span = prompt_ids[item.offset:item.offset + item.length]
        placeholders = sum(1 for t in span if int(t) == token_id)
    counts = {"placeholder tokens": placeholders, "encoder rows": encoder_rows}
    if item.grid is not None and len(item.grid) == 3 and merge > 0:
        t, h, w = item.grid
        counts["grid t·h·w/merge²"] = (t * h * w) // (merge * merge)
    if len(set(counts.values())) <= 1:
        return None
    return ", ".join(f"{k} {v}" for k, v in counts.items()) + (f" (grid {item.grid})" if item.grid else "")
