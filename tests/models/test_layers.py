"""Shared torch blocks: ``roll_rows`` against a per-row ``torch.roll``."""

import torch

from seqrec.models.layers import roll_rows


def test_roll_rows_matches_per_row_roll_and_inverts():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 7, 3, generator=g, requires_grad=True)
    offset = torch.tensor([0, 1, 6, 3, 13])
    y = roll_rows(x, offset)
    want = torch.stack([torch.roll(x[b], -int(offset[b]), dims=0) for b in range(5)])
    assert torch.equal(y, want)
    assert torch.equal(roll_rows(y, -offset), x)
    # its gradient is the inverse rotation of the upstream gradient
    up = torch.randn(5, 7, 3, generator=g)
    (y * up).sum().backward()
    assert torch.equal(x.grad, roll_rows(up, -offset))


def test_roll_rows_turns_left_padding_right():
    valid = torch.tensor([[False, False, True, True], [True, True, True, True]])
    items = torch.tensor([[0, 0, 5, 6], [1, 2, 3, 4]])
    shift = (~valid).sum(1)
    assert roll_rows(items[..., None], shift)[..., 0].tolist() == [[5, 6, 0, 0], [1, 2, 3, 4]]
