"""Selecting kept rows and keys: the same values as index_select, a view for one run of positions (no copy)."""

import pytest
import torch

from qdebug.model.device_index import index_on, select_positions


@pytest.mark.parametrize("positions", [[3], [0, 1, 2, 3], [2, 3, 4], [0, 2, 5], [5, 1], [4, 4]])
def test_select_positions_equals_index_select(positions):
    t = torch.randn(2, 3, 6, 4)
    expected = t.index_select(2, torch.tensor(positions))
    assert torch.equal(select_positions(t, 2, positions), expected)
    assert torch.equal(select_positions(t, -2, positions), expected)


def test_a_run_of_positions_is_a_view_and_other_lists_reuse_one_index():
    t = torch.randn(8, 5)
    run = select_positions(t, 0, [2, 3, 4])
    assert run.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()  # no copy, no index tensor
    assert index_on((0, 2, 5), t.device) is index_on((0, 2, 5), t.device)  # made once per device, reused every step
