"""Caser: conformance, only the last L items count, convolution shapes, unknown users."""

from __future__ import annotations

import numpy as np
import torch

from seqrec.data.batching import SequenceBatch
from seqrec.data.sequences import Sequences
from seqrec.models.caser import Caser, CaserConfig, CaserEncoder
from seqrec.registry import get_model
from seqrec.testing.conformance import ConformanceSuite, fitted

SMALL = {"dim": 16, "window": 3, "n_h": 4, "n_v": 2, "dropout": 0.1}


class TestCaserConformance(ConformanceSuite):
    model_cls = Caser
    config_kwargs = SMALL
    bad_configs = [
        {"dim": 0},
        {"window": 0},
        {"n_v": -1},
        {"n_v": 0, "n_h": 0},
        {"ac_conv": "gelu"},
        {"dropout": 1.0},
    ]


class TestCaserHorizontalOnly(ConformanceSuite):
    model_cls = Caser
    config_kwargs = {"dim": 16, "window": 4, "n_h": 4, "n_v": 0, "ac_fc": "tanh"}
    test_all_losses = None
    test_bad_configs = None
    test_seeded_refit = None
    test_exclude_seen = None


def test_registry():
    assert get_model("caser") == (CaserConfig, Caser)


def _encoder(window=3, n_users=2) -> CaserEncoder:
    torch.manual_seed(0)
    return CaserEncoder(CaserConfig(dim=8, window=window, max_len=8), 20, n_users=n_users).eval()


def _run(enc, items, users=(1,)):
    items = torch.tensor(items)
    batch = SequenceBatch(items=items, mask=items.ne(0), users=torch.tensor(users))
    with torch.no_grad():
        return enc(batch), enc.encode_last(batch)


def test_only_the_last_L_items_count():
    enc = _encoder(window=3)
    base, base_last = _run(enc, [[5, 6, 7, 8, 9, 10, 11, 12]])
    older, older_last = _run(enc, [[1, 2, 3, 4, 15, 10, 11, 12]])  # changed before the window
    inside, inside_last = _run(enc, [[5, 6, 7, 8, 9, 13, 11, 12]])  # changed inside it
    torch.testing.assert_close(base_last, older_last)
    torch.testing.assert_close(base_last, base[:, -1])
    assert not torch.allclose(base_last, inside_last)
    # every position sees its own window only: position 3 (items 6, 7, 8) is unchanged by 13
    torch.testing.assert_close(base[:, :5], inside[:, :5])
    assert not torch.allclose(base[:, 5:], inside[:, 5:])


def test_short_history_windows_are_pad_filled():
    enc = _encoder(window=4)
    padded, _ = _run(enc, [[0, 0, 0, 0, 0, 0, 3, 4]])
    windows = enc._windows(torch.tensor([[3, 4]]))
    assert windows.shape == (1, 2, 4, 8)
    pad = enc.item_emb.weight[0]
    torch.testing.assert_close(windows[0, 1, :2], pad.expand(2, -1))  # learned PAD rows
    torch.testing.assert_close(windows[0, 1, 2:], enc.item_emb.weight[[3, 4]])
    assert torch.all(padded[0, :6] == 0)


def test_hidden_is_z_then_user_embedding():
    enc = _encoder()
    out, last = _run(enc, [[0, 0, 1, 2, 3, 4, 5, 6]], users=(1,))
    torch.testing.assert_close(last[0, 8:], enc.user_emb.weight[1])
    weight, bias = enc.output_embeddings()
    assert weight.shape == (21, 16) and bias.shape == (21,)
    unknown, unknown_last = _run(enc, [[0, 0, 1, 2, 3, 4, 5, 6]], users=(7,))
    assert torch.all(unknown_last[0, 8:] == 0)
    torch.testing.assert_close(unknown_last[0, :8], last[0, :8])  # z is the user-free part


def test_fitted_model_scores_known_and_unknown_users():
    model = fitted(Caser, SMALL)
    hist = Sequences.from_lists(
        [[3, 4, 5, 6]] * 2, n_items=model.n_items, users=np.array([0, 10_000])
    )
    scores = model.score(hist)
    assert not np.allclose(scores[0, 1:], scores[1, 1:])
    no_ids = model.score(Sequences.from_lists([[3, 4, 5, 6]], n_items=model.n_items))
    np.testing.assert_allclose(no_ids[0], scores[1], rtol=1e-6, atol=1e-7)  # float32 paths


def test_matrix_product_convolutions_match_conv2d():
    torch.manual_seed(0)
    enc = CaserEncoder(CaserConfig(dim=6, window=4, n_v=3, n_h=5, ac_conv="tanh", dropout=0.0), 30)
    windows = torch.randn(7, 4, 6, requires_grad=True)
    fast = enc._features(windows)
    ref = enc._features_conv2d(windows)
    torch.testing.assert_close(fast, ref, rtol=1e-5, atol=1e-6)
    g_fast = torch.autograd.grad(
        fast.square().sum(), [windows, *enc.parameters()], allow_unused=True
    )
    g_ref = torch.autograd.grad(ref.square().sum(), [windows, *enc.parameters()], allow_unused=True)
    for a, b in zip(g_fast, g_ref, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
