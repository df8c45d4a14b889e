"""FISM: conformance, the normalized history sum, order invariance."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from seqrec.data.batching import SequenceBatch
from seqrec.models.fism import FISM, FISMConfig, FISMEncoder
from seqrec.registry import get_model
from seqrec.testing.conformance import ConformanceSuite

SMALL = {"dim": 16, "dropout": 0.1}


class TestFISMConformance(ConformanceSuite):
    model_cls = FISM
    config_kwargs = SMALL
    bad_configs = [{"dropout": 1.5}, {"dim": 0}, {"alpha": 1.5}, {"alpha": -0.1}, {"init_std": 0.0}]


def test_registry():
    assert get_model("fism") == (FISMConfig, FISM)


@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.0])
def test_hidden_is_normalized_prefix_sum(alpha):
    torch.manual_seed(0)
    enc = FISMEncoder(FISMConfig(dim=8, alpha=alpha, max_len=6), n_items=20).eval()
    items = torch.tensor([[0, 0, 3, 7, 7, 12], [1, 2, 3, 4, 5, 6]])
    with torch.no_grad():
        out = enc(SequenceBatch(items=items, mask=items.ne(0)))
        last = enc.encode_last(SequenceBatch(items=items, mask=items.ne(0)))
    p = enc.history_emb.weight.detach()
    for row in range(2):
        real = [i for i in items[row].tolist() if i]
        n_pad = 6 - len(real)
        for k in range(1, len(real) + 1):
            want = p[real[:k]].sum(0) / k**alpha
            torch.testing.assert_close(out[row, n_pad + k - 1], want)
        assert torch.all(out[row, :n_pad] == 0)
        torch.testing.assert_close(last[row], out[row, -1])


def test_history_is_a_bag_of_items():
    """FISM ignores the order of the history (only its last max_len items count)."""
    torch.manual_seed(1)
    enc = FISMEncoder(FISMConfig(dim=8, max_len=5), n_items=30).eval()
    a = torch.tensor([[4, 9, 1, 22, 7]])
    b = torch.tensor([[22, 7, 4, 1, 9]])
    with torch.no_grad():
        ha = enc.encode_last(SequenceBatch(items=a, mask=a.ne(0)))
        hb = enc.encode_last(SequenceBatch(items=b, mask=b.ne(0)))
    torch.testing.assert_close(ha, hb)
    weight, bias = enc.output_embeddings()
    assert weight is enc.target_emb.weight and bias is enc.item_bias  # Q and b_i, not P
    assert not np.allclose(enc.history_emb.weight.detach(), enc.target_emb.weight.detach())
