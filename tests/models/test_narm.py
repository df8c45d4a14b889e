"""NARM: conformance (softmax and raw attention), attention over real positions only, a
per-position reference of the local encoder, chunking."""

from __future__ import annotations

import pytest
import torch

import seqrec.models.narm as narm_module
from seqrec.data.batching import SequenceBatch
from seqrec.models.narm import NARM, NARMConfig, NARMEncoder, _AdditiveEnergy, _attend
from seqrec.registry import get_model
from seqrec.testing.conformance import ConformanceSuite

SMALL = {"dim": 16, "hidden": 16, "dropout": 0.1, "dropout_embed": 0.1}


class TestNARMConformance(ConformanceSuite):
    model_cls = NARM
    config_kwargs = SMALL
    bad_configs = [{"dim": 0}, {"hidden": 0}, {"dropout": 1.0}, {"attention_norm": "tanh"}]


class TestNARMRawAttention(ConformanceSuite):
    model_cls = NARM
    config_kwargs = {**SMALL, "attention_norm": "none"}
    test_all_losses = None
    test_bad_configs = None
    test_seeded_refit = None
    test_exclude_seen = None


def test_registry():
    assert get_model("narm") == (NARMConfig, NARM)


@pytest.mark.parametrize("softmax", [True, False])
def test_attention_ignores_masked_positions(softmax):
    """Whatever sits at a masked (PAD or future) key, the local context is the same."""
    torch.manual_seed(0)
    q, k, s = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 4)
    v = torch.randn(4)
    allowed = torch.rand(2, 3, 5) > 0.4
    allowed[..., 0] = True
    out = _attend(q, k, s, v, allowed, softmax)
    k2, s2 = k.clone(), s.clone()
    k2[~allowed.any(1)] = 1e3
    s2[~allowed.any(1)] = -1e3
    torch.testing.assert_close(_attend(q, k2, s2, v, allowed, softmax), out)
    if softmax:  # the weights of the allowed keys sum to one
        ones = _attend(q, k, torch.ones_like(s), v, allowed, softmax)
        torch.testing.assert_close(ones, torch.ones_like(ones))


def _reference(enc: NARMEncoder, items: torch.Tensor) -> torch.Tensor:
    """Position by position, from the unpadded prefix: B [h_t; sum_j alpha_tj h_j]."""
    out = torch.zeros(items.shape[0], items.shape[1], enc.config.dim)
    for r in range(items.shape[0]):
        real = items[r][items[r] != 0]
        n_pad = items.shape[1] - len(real)
        states, _ = enc.gru(enc.item_emb(real)[None])
        states = states[0]
        for t in range(len(real)):
            h_t, prefix = states[t], states[: t + 1]
            energy = torch.sigmoid(enc.a_query(h_t)[None] + enc.a_key(prefix)) @ enc.v
            alpha = torch.softmax(energy, 0) if enc.config.attention_norm == "softmax" else energy
            context = torch.cat([h_t, alpha @ prefix])
            out[r, n_pad + t] = enc.bilinear(context)
    return out


@pytest.mark.parametrize("norm", ["softmax", "none"])
def test_local_encoder_matches_a_per_position_reference(norm, monkeypatch):
    torch.manual_seed(0)
    enc = NARMEncoder(NARMConfig(dim=6, hidden=5, max_len=7, attention_norm=norm), 15).eval()
    items = torch.tensor([[0, 0, 0, 4, 9, 9, 2], [3, 1, 14, 7, 5, 6, 8], [0, 0, 0, 0, 0, 0, 11]])
    batch = SequenceBatch(items=items, mask=items.ne(0))
    with torch.no_grad():
        want = _reference(enc, items)
        torch.testing.assert_close(enc(batch), want, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(enc.encode_last(batch), want[:, -1], rtol=1e-5, atol=1e-6)
        monkeypatch.setattr(narm_module, "_BLOCK", 1)  # one query position per chunk
        torch.testing.assert_close(enc(batch), want, rtol=1e-5, atol=1e-6)


def test_chunked_attention_gives_the_same_gradients(monkeypatch):
    torch.manual_seed(0)
    enc = NARMEncoder(NARMConfig(dim=6, hidden=5, max_len=7, dropout=0.0, dropout_embed=0.0), 15)
    items = torch.tensor([[0, 0, 3, 4, 9, 1, 2], [3, 1, 14, 7, 5, 6, 8]])
    batch = SequenceBatch(items=items, mask=items.ne(0))
    enc.train()
    enc(batch).square().sum().backward()
    whole = [p.grad.clone() for p in enc.parameters()]
    enc.zero_grad()
    monkeypatch.setattr(narm_module, "_BLOCK", 1)
    enc(batch).square().sum().backward()
    for a, p in zip(whole, enc.parameters(), strict=True):
        torch.testing.assert_close(p.grad, a, rtol=1e-5, atol=1e-6)


def test_recomputing_energy_backward_matches_autograd():
    torch.manual_seed(0)
    q = torch.randn(2, 3, 4, dtype=torch.double, requires_grad=True)
    k = torch.randn(2, 5, 4, dtype=torch.double, requires_grad=True)
    v = torch.randn(4, dtype=torch.double, requires_grad=True)
    assert torch.autograd.gradcheck(_AdditiveEnergy.apply, (q, k, v))
    plain = torch.sigmoid(q[:, :, None, :] + k[:, None, :, :]) @ v
    torch.testing.assert_close(_AdditiveEnergy.apply(q, k, v), plain)
