"""Check that a fast path of an encoder computes what its plain path computes (test helper)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from seqrec.data.batching import SequenceBatch


def padded_batch(n_items: int = 40, rows: int = 6, width: int = 12) -> SequenceBatch:
    """A left-padded batch with rows of very different lengths (one real item, a few, full)."""
    items = torch.randint(1, n_items + 1, (rows, width), generator=torch.Generator().manual_seed(3))
    items[0, : width - 3] = 0
    items[1, : width - 1] = 0
    items[3, :4] = 0
    return SequenceBatch(items=items, mask=items.ne(0))


def assert_same_forward_and_backward(
    build: Callable[[], torch.nn.Module],
    batch: SequenceBatch,
    plain: Callable[[], Any],
    real_only: bool = False,
    **forward_kwargs: Any,
) -> None:
    """``build()`` (seeded inside, in the mode to test) run forward and backward once as it is
    and once after ``plain()`` switched its fast path off (``plain`` returns a callable that
    switches it back on): the same outputs bit for bit, the same gradients up to the order of
    float additions, and torch's generator left in the same state (the same random stream).
    ``real_only``: outputs compared, and the loss taken, at the batch's real positions only
    (a fast path that leaves PAD positions at 0)."""

    def run(fast: bool):
        torch.manual_seed(0)
        enc = build()
        undo = None if fast else plain()
        try:
            torch.manual_seed(5)
            out = enc(batch, **forward_kwargs)
            if real_only:
                out = out[batch.mask]
            weights = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)
            (out * weights).sum().backward()
        finally:
            if undo is not None:
                undo()
        grads = {n: p.grad for n, p in enc.named_parameters() if p.grad is not None}
        return out.detach(), grads, torch.rand(3)

    slow, fast = run(False), run(True)
    assert torch.equal(slow[0], fast[0])
    assert slow[1].keys() == fast[1].keys()
    for name, g in slow[1].items():
        torch.testing.assert_close(fast[1][name], g, msg=name)
    assert torch.equal(slow[2], fast[2]), "the fast path drew another random stream"
