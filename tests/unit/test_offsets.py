"""Measured offsets: a block of rows is found where it is, also when it hangs off either end of the sequence."""

import torch

from qdebug.analysis.offsets import SAME_ROWS, Candidate, block_offset, measure_image


def _stream(length=40, dim=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(length, dim, generator=g)


def test_block_found_inside_and_hanging_off_the_ends():
    seq = _stream()
    rows = torch.randn(8, 16, generator=torch.Generator().manual_seed(1))
    for where in (0, 17, 32, 36, -3):  # 36 and -3: half the block fell off the sequence
        s = seq.clone()
        for j in range(8):
            if 0 <= where + j < 40:
                s[where + j] = rows[j]
        off, score = block_offset(rows, s)
        assert off == where and score >= SAME_ROWS, (where, off, score)


def test_measure_names_the_donor_whose_rows_sit_in_the_span():
    seq = _stream()
    own, other = torch.randn(6, 16), torch.randn(6, 16)
    seq[10:16] = other
    cands = [Candidate("a", 0, own), Candidate("b", 0, other)]
    entry = measure_image(seq, (10, 16), "a", 0, cands)
    assert entry == {"index": 0, "text_offset": 10, "visual_offset": 10, "rows": 6, "donor": "b", "match": entry["match"]}
    seq[10:16] = own
    assert measure_image(seq, (10, 16), "a", 0, cands)["donor"] is None
