"""Contamination: whose visual rows landed in each request's token stream."""

from __future__ import annotations

EXACT = 1 - 1e-4  # a cosine this close to 1 means the same rows
SAME_ROW = 1e-6  # cosines this close are one row copied twice (float rounding), not a copy and a look-alike


def contamination_matrix(ids: list[str], landed: dict, encoded: dict) -> list[list[float | None]]:
    """matrix[r][d]: how well the rows that landed in r's stream match d's isolated encoder rows.

    Rows are compared in order (a buffer is read from its start), by cosine similarity; rows of r beyond d's
    row count score 0, so a partly overwritten stream shows as a mix. None where either side is unknown.
    """
    import torch

    matrix: list[list[float | None]] = []
    for r in ids:
        row: list[float | None] = []
        mine = landed.get(r)
        for d in ids:
            theirs = encoded.get(d)
            if mine is None or theirs is None or mine.shape[0] == 0:
                row.append(None)
                continue
            n = min(mine.shape[0], theirs.shape[0])
            cos = torch.nn.functional.cosine_similarity(mine[:n].float(), theirs[:n].float(), dim=-1)
            row.append(round(float(cos.sum()) / mine.shape[0], 6))
        matrix.append(row)
    return matrix


def donor_of(ids: list[str], matrix: list[list[float | None]], request_id: str) -> str | None:
    """The other request whose rows wholly fill `request_id`'s stream (score >= EXACT), if any.

    A stream that is only partly another's (a mix) has no donor here: see `is_mixed` and `contributors`.
    """
    i = ids.index(request_id)
    own = matrix[i][i]
    scores = [(s, d) for s, d in zip(matrix[i], ids) if s is not None and d != request_id]
    if not scores:
        return None
    best, donor = max(scores, key=lambda x: x[0])
    if best >= EXACT and (own is None or best > own + 1e-6):
        return donor
    return None


OWN, UNMATCHED = "own", "unmatched"  # row_owners' keys for rows of the request itself and rows of no one


def row_owners(request_id: str, ids: list[str], landed: dict, encoded: dict) -> dict[str, int]:
    """Whose each landed row of `request_id`'s stream is (exact match at the same index): counts that add up to its rows.

    A row belongs to one owner only, so the shares sum to 100%: of the requests whose row it equals (the request itself
    included), the closest; among rows equally close, the one that matches the most rows overall; a row equal to no
    one's is `UNMATCHED`. Largest first; keys are other requests' ids, `OWN` and `UNMATCHED`.
    """
    import torch

    mine = landed.get(request_id)
    if mine is None or mine.shape[0] == 0:
        return {}
    cosines = {}
    for d in ids:
        theirs = encoded.get(d)
        if theirs is None:
            continue
        n = min(mine.shape[0], theirs.shape[0])
        cos = torch.full((mine.shape[0],), -1.0)
        cos[:n] = torch.nn.functional.cosine_similarity(mine[:n].float(), theirs[:n].float(), dim=-1)
        cosines[d] = cos
    # Rows alike in several requests (plain background) go to whoever matches the most rows overall: that one wrote the
    # block they sit in. Ties: the request itself first, then id order. A copy is closer than a look-alike, though: a
    # background row of another image passes EXACT too, and must not take the row from the request it was copied from.
    order = sorted(cosines, key=lambda d: (-int((cosines[d] >= EXACT).sum()), d != request_id))
    counts: dict[str, int] = {}
    if not order:
        return {UNMATCHED: int(mine.shape[0])}
    table = torch.stack([cosines[d] for d in order])  # candidates (in order) × rows: one pass, not a loop per row
    best = table.max(dim=0).values
    eligible = (table >= best - SAME_ROW) & (best >= EXACT)
    first = eligible.float().argmax(dim=0)  # the first eligible candidate in order (0 where none: masked below)
    for row, (pick, any_owner) in enumerate(zip(first.tolist(), eligible.any(dim=0).tolist())):
        owner = order[pick] if any_owner else None
        key = OWN if owner == request_id else UNMATCHED if owner is None else owner
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items(), key=lambda x: -x[1]))


def is_mixed(ids: list[str], matrix: list[list[float | None]], request_id: str) -> bool:
    """Whether the stream holds rows that are not all from one request (no score reaches EXACT)."""
    row = [s for s in matrix[ids.index(request_id)] if s is not None]
    return bool(row) and max(row) < EXACT


def contamination_from_donors(ids: list[str], donors: dict[str, str]) -> list[list[float | None]]:
    """A 0/1 matrix for a runtime log: 1 where d's rows reached r (r itself unless overwritten)."""
    return [[1.0 if d == donors.get(r, r) else 0.0 for d in ids] for r in ids]
