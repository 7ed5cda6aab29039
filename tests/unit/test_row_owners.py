"""Whose rows landed in a stream (detectors.contamination.row_owners): each row goes to the request it was copied
from, never to another image's look-alike row (plain background passes the EXACT cosine too)."""

from __future__ import annotations

import torch

from qdebug.analysis.detectors.contamination import EXACT, OWN, UNMATCHED, row_owners


def _near(rows: torch.Tensor, cosine: float) -> torch.Tensor:
    """Rows at `cosine` from `rows` (each turned a little towards a fixed direction orthogonal to it)."""
    other = torch.randn(rows.shape, generator=torch.Generator().manual_seed(1))
    other -= (other * rows).sum(-1, keepdim=True) / (rows * rows).sum(-1, keepdim=True) * rows
    other *= rows.norm(dim=-1, keepdim=True) / other.norm(dim=-1, keepdim=True)
    angle = torch.acos(torch.tensor(cosine))
    return torch.cos(angle) * rows + torch.sin(angle) * other


def test_a_copied_row_goes_to_the_request_it_was_copied_from_not_a_look_alike_that_matches_more():
    g = torch.Generator().manual_seed(0)
    own, a = torch.randn(8, 32, generator=g), torch.randn(8, 32, generator=g)
    stream = torch.cat([a[:4], torch.randn(4, 32, generator=g)])  # rows 0-3: a's, copied; rows 4-7: b's below
    b = _near(stream, 1 - 2e-5)  # b's image is plain background: every row alike (over EXACT), none a copy
    b[4:] = stream[4:]
    assert float(torch.nn.functional.cosine_similarity(stream[:4], b[:4], dim=-1).min()) >= EXACT
    owners = row_owners("r", ["a", "b", "r"], {"r": stream}, {"a": a, "b": b, "r": own})
    assert owners == {"a": 4, "b": 4}  # before: {"b": 8}, b matching the most rows overall took a's copies too


def test_rows_equal_in_several_requests_go_to_the_one_that_matches_most_and_the_rest_are_counted():
    g = torch.Generator().manual_seed(2)
    own, a = torch.randn(6, 16, generator=g), torch.randn(6, 16, generator=g)
    b = a.clone()
    b[4:] = torch.randn(2, 16, generator=g)
    stream = torch.cat([a[:4], own[4:5], torch.randn(1, 16, generator=g)])
    assert row_owners("r", ["a", "b", "r"], {"r": stream}, {"a": a, "b": b, "r": own}) == {"a": 4, OWN: 1, UNMATCHED: 1}
