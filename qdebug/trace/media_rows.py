"""An encoder's rows against the rows found at their placeholders: identical bits, NaN included.

`torch.equal` says NaN != NaN, so rows copied into place that hold a NaN would read as rows that moved: a false
sync finding beside the true one (the encode stage's own NaN/Inf check reports the NaN)."""

from __future__ import annotations


def same_rows(at, rows) -> bool:
    """Whether two row blocks hold the same values, a NaN matching a NaN (and an infinity the same infinity)."""
    import torch

    if at.shape != rows.shape:
        return False
    rows = rows.to(at.dtype)
    return bool(torch.equal(at, rows) or ((at == rows) | (at.isnan() & rows.isnan())).all())


def rows_gap(at, rows) -> float:
    """Largest |difference| between two row blocks of one shape, where equal values (NaN with NaN, an infinity with
    itself) differ by 0; NaN only where one side is NaN and the other is not."""
    import torch

    if not at.numel():
        return 0.0
    a, b = at.float(), rows.float()
    gap = torch.where((a == b) | (a.isnan() & b.isnan()), torch.zeros_like(a), (a - b).abs())
    return float(gap.max())  # NaN if any place is NaN on one side only
