"""The engine's shared-visual-buffer fault on its own: the images of one step pass through one buffer in the seeded
order, so some read another's rows; one image alone reads its own; the same seed and step give the same mix."""

import torch

from qdebug.engine.shared_buffer import SharedStepBuffer


def _items(n: int, rows: int = 4) -> list:
    return [torch.full((rows, 3), float(i)) for i in range(n)]


def _owners(out: list) -> list[int]:
    return [int(t[0, 0]) for t in out]


def test_images_of_one_step_read_each_others_rows():
    out = SharedStepBuffer(seed=0).pass_through(_items(14))
    owners = _owners(out)
    assert owners != list(range(14))  # someone read rows another image wrote over its own
    assert all(bool((t == t[0, 0]).all()) for t in out)  # same-size images: whole rows of one writer
    assert set(owners) <= set(range(14))


def test_one_image_alone_reads_its_own_rows_and_a_seed_repeats_its_mix():
    assert _owners(SharedStepBuffer(seed=3).pass_through(_items(1))) == [0]
    assert _owners(SharedStepBuffer(seed=5).pass_through(_items(14))) == _owners(SharedStepBuffer(seed=5).pass_through(_items(14)))


def test_a_smaller_image_written_over_leaves_a_mix():
    items = [torch.full((6, 3), 0.0), torch.full((2, 3), 1.0)]
    mixes = [SharedStepBuffer(seed=s).pass_through(items)[0][:, 0].tolist() for s in range(20)]
    assert [1.0, 1.0, 0.0, 0.0, 0.0, 0.0] in mixes  # the big image's read after the small one's write: its head overwritten
