import numpy as np
import pytest
import torch

from seqrec.data.batching import SequenceBatch
from seqrec.data.sequences import Sequences
from seqrec.errors import ConfigError
from seqrec.models.fmlprec import (
    FilterLayer,
    FMLPRec,
    FMLPRecConfig,
    FMLPRecEncoder,
    prefix_samples,
)
from seqrec.models.neural_config import settings
from seqrec.testing import conformance as C
from seqrec.testing.conformance import ConformanceSuite
from seqrec.training.negatives import NegativeSampler


class TestFMLPRecConformance(ConformanceSuite):
    model_cls = FMLPRec
    config_kwargs = {"dim": 16, "n_blocks": 2, "dropout": 0.1}
    bad_configs = [
        {"dim": 0},
        {"n_blocks": 0},
        {"dropout": 1.0},
        {"ffn_dim": -1},
        {"train_windows": "sliding"},
    ]


def test_filter_equals_a_circular_convolution():
    """irfft(W * rfft(x)) (orthonormal) is sum_s h[(t - s) mod L] x[s] with h = irfft(W)."""
    torch.manual_seed(0)
    for length in (7, 8):
        layer = FilterLayer(length, 3, 0.0).double()
        x = torch.randn(2, length, 3, dtype=torch.float64)
        got = layer.filter(x)
        h = torch.fft.irfft(torch.view_as_complex(layer.weight), n=length, dim=0)  # [L, D]
        ref = torch.zeros_like(x)
        for t in range(length):
            for s in range(length):
                ref[:, t] += h[(t - s) % length] * x[:, s]
        assert torch.allclose(got, ref, atol=1e-12)
        # a non-trivial filter: output t depends on later positions (the window wraps)
        assert h.abs().min() > 0


def test_filter_gradients_match_the_convolution():
    torch.manual_seed(1)
    layer = FilterLayer(6, 2, 0.0).double()
    x = torch.randn(1, 6, 2, dtype=torch.float64, requires_grad=True)
    g1 = torch.autograd.grad(layer.filter(x).pow(2).sum(), [x, layer.weight])
    h = torch.fft.irfft(torch.view_as_complex(layer.weight), n=6, dim=0)
    idx = (torch.arange(6)[:, None] - torch.arange(6)[None]) % 6
    ref = torch.einsum("tsd,bsd->btd", h[idx], x)
    g2 = torch.autograd.grad(ref.pow(2).sum(), [x, layer.weight])
    assert all(torch.allclose(a, b, atol=1e-10) for a, b in zip(g1, g2, strict=True))


def test_prefix_samples_are_the_official_ones():
    rows = [[1, 2, 3], [4, 5, 6, 7, 8, 9], [7]]
    train = Sequences.from_lists(rows, n_items=9)
    row, at, n = prefix_samples(train, max_len=4)
    got = [
        (int(r), list(train.items[a - k : a]), int(train.items[a]))
        for r, a, k in zip(row, at, n, strict=True)
    ]
    ref = []  # FMLPRecDataset: prefixes of the last max_len items, input = prefix[:-1]
    for r, seq in enumerate(rows):
        window = seq[-4:]
        ref += [(r, window[:i], window[i]) for i in range(len(window))]
    assert got == ref


def test_training_batch_holds_the_prefix_left_padded_and_its_target_last():
    rows = [[1, 2, 3], [4, 5, 6, 7, 8, 9]]
    train = Sequences.from_lists(rows, n_items=9)
    model = FMLPRec(FMLPRecConfig(max_len=4, dim=8))
    windows, source, ids = model.training_rows(train)
    assert len(ids) == 3 + 4 and np.array_equal(source, [0, 0, 0, 1, 1, 1, 1])
    b = model.make_batch(windows, ids, np.random.default_rng(0))["batch"]
    assert b.items.tolist()[:3] == [[0, 0, 0, 0], [0, 0, 0, 1], [0, 0, 1, 2]]
    assert b.items.tolist()[6] == [0, 6, 7, 8]
    assert b.targets[:, :-1].eq(0).all() and b.targets[:, -1].tolist() == [1, 2, 3, 6, 7, 8, 9]


def test_loss_uses_only_the_last_position_and_matches_the_full_forward():
    _, train, _, _ = C._data()
    for loss in ("ce", "bce"):
        model = FMLPRec(
            settings(FMLPRecConfig, **{**C.TINY, "dim": 8, "dropout": 0.0, "loss": loss})
        )
        model.fit(train, None, progress=False)
        windows, model._row_source, ids = model.training_rows(train)
        model._sampler = NegativeSampler(train)
        data = model.make_batch(windows, ids[:16], np.random.default_rng(0))
        model.encoder.eval()
        fast = model.compute_loss(data)
        full = model.loss_at(model.encoder(data["batch"]), data["batch"].targets, data)
        assert torch.allclose(fast, full, atol=1e-6), loss


def test_padding_to_max_len_is_internal_so_extra_padding_changes_nothing():
    torch.manual_seed(0)
    enc = FMLPRecEncoder(FMLPRecConfig(max_len=8, dim=8, dropout=0.0), n_items=9).eval()
    short = torch.tensor([[3, 4, 5]])
    long = torch.tensor([[0, 0, 3, 4, 5]])
    a = enc(SequenceBatch(items=short, mask=short.ne(0)))
    b = enc(SequenceBatch(items=long, mask=long.ne(0)))
    assert torch.allclose(a, b[:, 2:])
    # ... but PAD positions are filter inputs (as in the official code): their position
    # embeddings reach the real outputs, so max_len is part of the model
    with torch.no_grad():
        enc.pos_emb.weight[0] += torch.randn(8)  # (a constant shift would vanish in LayerNorm)
    c = enc(SequenceBatch(items=short, mask=short.ne(0)))
    assert not torch.allclose(a, c)


def test_output_at_a_position_sees_later_items():
    torch.manual_seed(0)
    enc = FMLPRecEncoder(FMLPRecConfig(max_len=6, dim=8, dropout=0.0), n_items=9).eval()
    a = torch.tensor([[1, 2, 3, 4, 5, 6]])
    b = a.clone()
    b[0, -1] = 9
    out_a, out_b = (enc(SequenceBatch(items=x, mask=x.ne(0))) for x in (a, b))
    assert not torch.allclose(out_a[:, 0], out_b[:, 0])  # why FMLPRec.causal is False


def test_sliding_windows_are_rejected():
    with pytest.raises(ConfigError, match="train_windows"):
        settings(FMLPRecConfig, train_windows="sliding")


def test_resume_continues_exactly(tmp_path):
    _, train, valid, test = C._data()
    kw = {**C.TINY, "dim": 8, "patience": 0, "loss": "bce"}
    kw.pop("epochs")
    FMLPRec(settings(FMLPRecConfig, **kw, epochs=1)).fit(
        train, valid, checkpoint_dir=tmp_path, progress=False
    )
    two = FMLPRec(settings(FMLPRecConfig, **kw, epochs=2)).fit(
        train, valid, checkpoint_dir=tmp_path, progress=False
    )
    straight = FMLPRec(settings(FMLPRecConfig, **kw, epochs=2)).fit(train, valid, progress=False)
    assert two.training_log.resumed_from_step
    hist = test.histories()
    np.testing.assert_array_equal(two.score(hist), straight.score(hist))
