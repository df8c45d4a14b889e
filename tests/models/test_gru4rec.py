"""GRU4Rec: conformance (tied and separate embeddings, two layers), the left-padded GRU runner
against a step-by-step GRU cell, and the official initialization."""

from __future__ import annotations

import math

import torch
from torch import nn

from seqrec.data.batching import SequenceBatch
from seqrec.models.gru4rec import GRU4Rec, GRU4RecConfig, GRU4RecEncoder, run_left_padded
from seqrec.registry import get_model
from seqrec.testing.conformance import ConformanceSuite

SMALL = {"dim": 16, "dropout": 0.1}


class TestGRU4RecConformance(ConformanceSuite):
    model_cls = GRU4Rec
    config_kwargs = SMALL
    bad_configs = [
        {"dim": 0},
        {"n_layers": 0},
        {"embedding": "onehot"},
        {"dropout": 1.0},
        {"dropout_embed": -0.1},
    ]


class TestGRU4RecSeparateTwoLayers(ConformanceSuite):
    model_cls = GRU4Rec
    config_kwargs = {"dim": 16, "n_layers": 2, "embedding": "separate", "dropout_embed": 0.1}
    test_all_losses = None
    test_bad_configs = None
    test_seeded_refit = None
    test_exclude_seen = None


def test_registry():
    assert get_model("gru4rec") == (GRU4RecConfig, GRU4Rec)


def test_left_padded_runner_matches_a_step_by_step_cell():
    torch.manual_seed(0)
    gru = nn.GRU(4, 5, batch_first=True)
    cell = nn.GRUCell(4, 5)
    cell.load_state_dict({k.replace("_l0", ""): v for k, v in gru.state_dict().items()})
    lengths = [6, 3, 1, 0]
    x = torch.randn(4, 6, 4)
    valid = torch.zeros(4, 6, dtype=torch.bool)
    for r, n in enumerate(lengths):
        valid[r, 6 - n :] = True
    x = x * valid[..., None]
    with torch.no_grad():
        out = run_left_padded(gru, x, valid)
        for r, n in enumerate(lengths):
            h = torch.zeros(1, 5)
            for t in range(6 - n, 6):
                h = cell(x[r : r + 1, t], h)
                torch.testing.assert_close(out[r, t], h[0], rtol=1e-5, atol=1e-6)
            assert torch.all(out[r, : 6 - n] == 0)


def test_tied_embedding_is_the_output_matrix():
    torch.manual_seed(0)
    tied = GRU4RecEncoder(GRU4RecConfig(dim=8, max_len=5, dropout=0.0), n_items=30)
    assert tied.in_emb is None
    items = torch.tensor([[0, 2, 5, 7, 9]])
    batch = SequenceBatch(items=items, mask=items.ne(0), targets=torch.tensor([[0, 5, 7, 9, 3]]))
    out = tied(batch)
    out.sum().backward()
    grad = tied.out_emb.weight.grad
    # input rows of W_y get gradient through the GRU even though no score was computed
    assert grad[[2, 5, 7, 9]].abs().sum() > 0 and grad[[1, 3, 4]].abs().sum() == 0
    weight, bias = tied.output_embeddings()
    assert weight is tied.out_emb.weight and bias is tied.out_bias
    separate = GRU4RecEncoder(GRU4RecConfig(dim=8, embedding="separate"), n_items=30)
    n_tied = sum(p.numel() for p in tied.parameters())
    assert sum(p.numel() for p in separate.parameters()) == n_tied + 31 * 8


def test_official_initialization():
    torch.manual_seed(0)
    enc = GRU4RecEncoder(GRU4RecConfig(dim=32), n_items=500)
    w = enc.out_emb.weight
    assert torch.all(w[0] == 0) and torch.all(enc.out_bias == 0)
    assert w.abs().max() <= math.sqrt(6 / (500 + 32))
    assert w.abs().max() > 0.9 * math.sqrt(6 / (500 + 32))
    gru = enc.grus[0]
    assert gru.weight_hh_l0.abs().max() <= math.sqrt(6 / 64)
    assert torch.all(gru.bias_ih_l0 == 0) and torch.all(gru.bias_hh_l0 == 0)
