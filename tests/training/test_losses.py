import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from seqrec.errors import ConfigError, DataError
from seqrec.models.gru4rec import GRU4RecConfig
from seqrec.models.hstu import HSTUConfig
from seqrec.models.lrurec import LRURecConfig
from seqrec.models.neural_config import TrainConfig
from seqrec.models.neural_config import settings as model_settings
from seqrec.models.sasrec import SASRecConfig
from seqrec.training.losses import (
    bce_loss,
    full_ce_loss,
    gbce_beta,
    gbce_loss,
    next_item_loss,
    sampled_softmax_loss,
)


def _inputs(seed, b=3, length=6, d=5, n_items=13, bias=True):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(b, length, d, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(n_items + 1, d, generator=g, dtype=torch.float64, requires_grad=True)
    bb = (
        torch.randn(n_items + 1, generator=g, dtype=torch.float64, requires_grad=True)
        if bias
        else None
    )
    t = torch.randint(1, n_items + 1, (b, length), generator=g)
    t[0, :3] = 0  # left padding
    return h, w, bb, t


def _grads(loss, tensors):
    return torch.autograd.grad(loss, [x for x in tensors if x is not None])


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), chunk=st.integers(1, 20), bias=st.booleans())
def test_full_ce_matches_reference_values_and_gradients(seed, chunk, bias):
    h, w, b, t = _inputs(seed, bias=bias)
    ours = full_ce_loss(h, t, w, b, chunk_size=chunk)
    valid = t > 0
    logits = h[valid] @ w.T + (0 if b is None else b)
    logits = torch.cat([torch.full_like(logits[:, :1], float("-inf")), logits[:, 1:]], 1)
    ref = F.cross_entropy(logits, t[valid])
    assert torch.allclose(ours, ref)
    for g1, g2 in zip(_grads(ours, (h, w, b)), _grads(ref, (h, w, b)), strict=True):
        assert torch.allclose(g1, g2, atol=1e-10)


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    chunk=st.integers(1, 20),
    bias=st.booleans(),
    smoothing=st.sampled_from([0.05, 0.1, 0.5]),
)
def test_full_ce_with_label_smoothing_matches_torch_over_the_real_items(
    seed, chunk, bias, smoothing
):
    h, w, b, t = _inputs(seed, bias=bias)
    ours = full_ce_loss(h, t, w, b, chunk_size=chunk, label_smoothing=smoothing)
    valid = t > 0
    logits = (h[valid] @ w.T + (0 if b is None else b))[:, 1:]  # PAD is no class
    ref = F.cross_entropy(logits, t[valid] - 1, label_smoothing=smoothing)
    assert torch.allclose(ours, ref)
    for g1, g2 in zip(_grads(ours, (h, w, b)), _grads(ref, (h, w, b)), strict=True):
        assert torch.allclose(g1, g2, atol=1e-10)
    assert not torch.allclose(ours, full_ce_loss(h, t, w, b, chunk_size=chunk))


def test_label_smoothing_is_checked_and_needs_the_full_cross_entropy():
    assert TrainConfig(label_smoothing=0.1).label_smoothing == 0.1
    for bad in (-0.1, 1.0):
        with pytest.raises(ConfigError, match="label_smoothing"):
            TrainConfig(label_smoothing=bad)
    # set beside another loss it is an error; a model's own default smoothing belongs to its
    # cross-entropy, and another loss leaves it aside
    for smoothed in (SASRecConfig, LRURecConfig, HSTUConfig):
        assert smoothed.train_defaults["label_smoothing"] > 0
        _, train, _ = model_settings(smoothed, loss="bce").parts
        assert train.loss == "bce"
        with pytest.raises(ConfigError, match="loss = 'ce' only"):
            model_settings(smoothed, loss="bce", label_smoothing=0.2)
    assert "label_smoothing" not in GRU4RecConfig.train_defaults
    with pytest.raises(ConfigError, match="loss = 'ce' only"):
        model_settings(GRU4RecConfig, loss="bce", label_smoothing=0.1)


def test_the_training_config_smoothing_reaches_the_loss():
    h, w, b, t = _inputs(3)
    cfg = TrainConfig(label_smoothing=0.2)
    got = next_item_loss(cfg, h, t, {}, w, b, torch.device("cpu"), 4)
    assert torch.allclose(got, full_ce_loss(h, t, w, b, 4, label_smoothing=0.2))
    assert not torch.allclose(got, full_ce_loss(h, t, w, b, 4))


def test_full_ce_ignores_padding_positions():
    h, w, b, t = _inputs(1)
    loss = full_ce_loss(h, t, w, b)
    h2 = h.detach().clone()
    h2[t == 0] = 1e6  # garbage at PAD positions must not matter
    assert torch.allclose(full_ce_loss(h2, t, w, b), loss)
    (gh,) = torch.autograd.grad(loss, [h])
    assert torch.all(gh[t == 0] == 0)


def test_bce_matches_formula():
    h, w, _, t = _inputs(2, bias=False)
    negs = torch.randint(1, 14, t.shape)
    v = t > 0
    pos = (h[v] * w[t[v]]).sum(-1)
    neg = (h[v] * w[negs[v]]).sum(-1)
    ref = -(torch.log(torch.sigmoid(pos)) + torch.log(1 - torch.sigmoid(neg))).mean()
    assert torch.allclose(bce_loss(h, t, negs, w), ref)


def test_sampled_softmax_with_every_item_equals_full_ce():
    h, w, b, t = _inputs(3)
    every = torch.arange(1, w.shape[0])
    full = full_ce_loss(h, t, w, b)
    sampled = sampled_softmax_loss(h, t, every, w, b)
    assert torch.allclose(full, sampled)


def test_sampled_softmax_logq_shifts_negatives():
    h, w, b, t = _inputs(4)
    negs = torch.tensor([2, 5, 7])
    plain = sampled_softmax_loss(h, t, negs, w, b)
    zero = sampled_softmax_loss(h, t, negs, w, b, torch.zeros(3, dtype=torch.float64))
    assert torch.allclose(plain, zero)
    # a large log q (very popular negatives) shrinks their logits: the loss drops
    corrected = sampled_softmax_loss(h, t, negs, w, b, torch.full((3,), 5.0, dtype=torch.float64))
    assert corrected < plain


def test_gbce_reduces_to_bce_at_t0_and_beta_bounds():
    h, w, _, t = _inputs(5, bias=False)
    negs = torch.randint(1, 14, (t.shape[0], 4))
    assert gbce_beta(4, 13, 0.0) == pytest.approx(1.0)
    assert gbce_beta(4, 13, 1.0) == pytest.approx(4 / 12)
    v = t > 0
    pos = (h * w[t]).sum(-1)
    neg = torch.einsum("bld,bkd->blk", h, w[negs])
    ref = (F.softplus(-pos) + F.softplus(neg).sum(-1))[v].mean()
    assert torch.allclose(gbce_loss(h, t, negs, w, t=0.0), ref)
    beta = gbce_beta(4, 13, 0.75)
    ref75 = (beta * F.softplus(-pos) + F.softplus(neg).sum(-1))[v].mean()
    assert torch.allclose(gbce_loss(h, t, negs, w, t=0.75), ref75)


def test_losses_reject_batches_without_targets():
    h, w, b, t = _inputs(6)
    zeros = torch.zeros_like(t)
    with pytest.raises(DataError):
        full_ce_loss(h, zeros, w, b)
    with pytest.raises(DataError):
        bce_loss(h, zeros, zeros + 1, w, b)


def test_full_ce_chunk_is_capped_by_catalogue_size(monkeypatch):
    from seqrec.training import losses

    seen = []
    real = losses._ChunkedSoftmaxCE.apply
    monkeypatch.setattr(losses._ChunkedSoftmaxCE, "apply", lambda *a: seen.append(a[4]) or real(*a))
    h, w, b, t = _inputs(7)  # 14 rows in the prediction layer
    ref = full_ce_loss(h, t, w, b, chunk_size=1000)
    capped = full_ce_loss(h, t, w, b, chunk_size=1000, max_chunk_logits=14 * 3)
    assert seen == [1000, 3] and torch.allclose(ref, capped)


def test_full_ce_chunk_on_cpu_is_capped_by_default(monkeypatch):
    """Without ``max_chunk_logits`` a CPU chunk holds at most ``CPU_CHUNK_LOGITS`` logits."""
    from seqrec.training import losses

    seen = []
    real = losses._ChunkedSoftmaxCE.apply
    monkeypatch.setattr(losses._ChunkedSoftmaxCE, "apply", lambda *a: seen.append(a[4]) or real(*a))
    monkeypatch.setattr(losses, "CPU_CHUNK_LOGITS", 14 * 2)
    h, w, b, t = _inputs(7)  # 14 rows in the prediction layer
    capped = full_ce_loss(h, t, w, b, chunk_size=1000)
    wide = full_ce_loss(h, t, w, b, chunk_size=1000, max_chunk_logits=1 << 24)
    assert seen == [2, 1000] and torch.allclose(wide, capped)


@pytest.mark.parametrize("bias", [True, False])
def test_full_ce_in_bfloat16_matmuls_is_close_to_float32_and_returns_float32_grads(bias):
    g = torch.Generator().manual_seed(1)
    h = (0.3 * torch.randn(4, 50, 32, generator=g)).requires_grad_()
    w = (0.3 * torch.randn(301, 32, generator=g)).requires_grad_()
    b = (0.1 * torch.randn(301, generator=g)).requires_grad_() if bias else None
    t = torch.randint(1, 301, (4, 50), generator=g)
    t[0, :10] = 0
    exact = full_ce_loss(h, t, w, b, chunk_size=37)
    low = full_ce_loss(h, t, w, b, chunk_size=37, mm_dtype=torch.bfloat16)
    assert low.dtype == torch.float32
    assert abs(float((low - exact).detach())) < 2e-3 * float(exact.detach())
    for g1, g2 in zip(_grads(low, (h, w, b)), _grads(exact, (h, w, b)), strict=True):
        assert g1.dtype == torch.float32
        rel = float((g1 - g2).norm() / g2.norm())
        assert 0 < rel < 2e-2  # rounded (not silently float32), yet close
    # bfloat16 hidden states (an autocast forward) are taken up to the weights' type
    half = full_ce_loss(h.detach().bfloat16(), t, w.detach(), None if b is None else b.detach())
    assert half.dtype == torch.float32
