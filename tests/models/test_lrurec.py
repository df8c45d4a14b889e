"""LRURec: conformance, LRU initialisation, incremental (recurrent) mode, streaming API."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from seqrec.data.batching import SequenceBatch
from seqrec.errors import ConfigError, DataError, NotFittedError
from seqrec.models.lru_scan import lru_sequential_scan
from seqrec.models.lrurec import LRUEncoder, LRURec, LRURecConfig
from seqrec.models.neural_config import TrainConfig
from seqrec.models.neural_config import settings as model_settings
from seqrec.registry import get_model
from seqrec.testing.conformance import ConformanceSuite, _data, fitted
from seqrec.testing.same_path import assert_same_forward_and_backward, padded_batch

SMALL = {"dim": 16, "n_blocks": 2, "dropout": 0.1}


class TestLRURecConformance(ConformanceSuite):
    model_cls = LRURec
    config_kwargs = SMALL
    bad_configs = [
        {"dim": 0},
        {"n_blocks": 0},
        {"dropout": 1.5},
        {"r_min": 0.99, "r_max": 0.8},
        {"r_max": 1.0},
        {"r_min": 0.0},
        {"embed_dropout_at": "middle"},
    ]


def _encoder(n_items=30, dim=8, double=False, seed=0) -> LRUEncoder:
    torch.manual_seed(seed)
    enc = LRUEncoder(LRURecConfig(dim=dim, max_len=64), n_items).eval()
    return enc.double() if double else enc


def test_registry_and_defaults():
    config_cls, model_cls = get_model("lrurec")
    assert config_cls is LRURecConfig and model_cls is LRURec
    cfg, train = LRURecConfig(), TrainConfig.for_model(LRURecConfig)
    assert (cfg.dim, cfg.n_blocks, train.weight_decay, train.loss) == (64, 2, 1e-2, "ce")
    with pytest.raises(ConfigError, match="r_min"):
        LRURecConfig(r_min=0.5, r_max=0.4)


@pytest.mark.parametrize("where", ["before_norm", "after_norm"])
def test_embedding_dropout_position(where):
    """before_norm = LayerNorm(Dropout(E x)) (authors' code), after_norm = Dropout(LayerNorm(E x))."""
    torch.manual_seed(0)
    enc = LRUEncoder(LRURecConfig(dim=8, dropout=0.5, embed_dropout_at=where), 20).train()
    items = torch.arange(1, 11).reshape(2, 5)
    torch.manual_seed(1)
    got = enc._embed(items)
    e = enc.embedding(items)
    torch.manual_seed(1)
    keep = _drop(torch.ones_like(e), 0.5)  # the same mask (LRURec's dropout)
    ln = enc.embed_norm
    want = ln(e * keep) if where == "before_norm" else ln(e) * keep
    torch.testing.assert_close(got, want)
    if where == "before_norm":  # LayerNorm last: every row is normalised, none has zeros left
        assert torch.allclose(got.mean(-1), torch.zeros(2, 5), atol=1e-5)
    else:
        assert (got == 0).any()
    assert LRURecConfig().embed_dropout_at == "before_norm"


def test_ring_initialisation():
    enc = _encoder(dim=32)
    for block in enc.blocks:
        lru = block.lru
        lam = lru.lam().detach()
        r = lam.abs()
        assert lam.shape == (64,)  # the doubled state size: 2 d
        assert torch.all(r >= 0.8 - 1e-6) and torch.all(r <= 0.99 + 1e-6)
        theta = torch.exp(lru.theta_log.detach())
        assert torch.all(theta >= 0) and torch.all(theta <= 2 * math.pi + 1e-6)
        gamma = torch.exp(lru.gamma_log.detach())
        torch.testing.assert_close(gamma, torch.sqrt(1 - r**2))
        # truncated normal: within two standard deviations of 0
        assert lru.B_re.abs().max() <= 0.04 + 1e-7 and lru.B_re.std() > 0.005
    assert enc.embedding.weight.abs().max() <= 0.04 + 1e-7


@settings(max_examples=6, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 14), min_size=1, max_size=3),
    double=st.booleans(),
    seed=st.integers(0, 100),
)
def test_incremental_equals_full_reencoding(lengths, double, seed):
    """After every appended item, step() == forward() at the last position of the prefix."""
    enc = _encoder(double=double, seed=seed)
    rng = np.random.default_rng(seed)
    length = max(lengths)
    items = np.zeros((len(lengths), length), np.int64)
    for r, n in enumerate(lengths):
        items[r, length - n :] = rng.integers(1, enc.n_items + 1, size=n)
    items = torch.from_numpy(items)
    tol = 1e-10 if double else 2e-5
    with torch.no_grad():
        state = enc.init_state(len(lengths))
        for t in range(length):
            state, hidden = enc.step(state, items[:, t])
            prefix = items[:, : t + 1]
            full = enc(SequenceBatch(items=prefix, mask=prefix != 0))[:, -1]
            real = items[:, t] != 0
            torch.testing.assert_close(hidden[real], full[real], rtol=tol, atol=tol)
            # a PAD step leaves an empty row empty (its output stays zero)
            assert torch.all(hidden[state.length == 0] == 0)
        np.testing.assert_array_equal(state.length.numpy(), lengths)


def test_prefill_then_step_equals_forward():
    enc = _encoder(double=True)
    torch.manual_seed(1)
    items = torch.randint(1, enc.n_items + 1, (3, 23))
    items[1, :10] = 0
    with torch.no_grad():
        full = enc(SequenceBatch(items=items, mask=items != 0))
        state = enc.prefill(items[:, :17])
        torch.testing.assert_close(state.last, full[:, 16])
        for t in range(17, 23):
            state, hidden = enc.step(state, items[:, t])
            torch.testing.assert_close(hidden, full[:, t])
        # item 0 = no event: the row keeps its state and output
        before = state
        state, hidden = enc.step(state, torch.tensor([0, 5, 0]))
        torch.testing.assert_close(hidden[0], before.last[0])
        torch.testing.assert_close(state.h[1][2], before.h[1][2])
        assert not torch.allclose(hidden[1], before.last[1])
        assert state.length.tolist() == [23, 14, 23]
    with pytest.raises(DataError, match="item_ids"):
        enc.step(state, torch.tensor([1, 2]))


def test_padding_rows_get_zero_lru_input():
    """The LRU bias is masked at PAD positions: an all-PAD prefix leaves the state at zero."""
    enc = _encoder()
    items = torch.tensor([[0, 0, 0, 4, 5]])
    with torch.no_grad():
        _, states = enc.encode(items, items != 0)
    for h in states:
        assert torch.all(h[0, :3] == 0) and torch.all(h[0, 3:].abs() > 0)


@pytest.mark.parametrize("length", [5, 40])  # below and above the sum-over-time crossover
def test_last_state_is_the_scans_last_state(length):
    """``last_state`` (the sum over time taken first, or the scan for short rows) equals the
    sequential recurrence's last state, PAD prefixes and the bias included, and so does the
    encoder's last output."""
    enc = _encoder(dim=8, double=True, seed=3)
    lru = enc.blocks[-1].lru
    torch.manual_seed(1)
    x = torch.randn(4, length, 8, dtype=torch.float64)
    mask = torch.ones(4, length, dtype=torch.bool)
    mask[1, : length - 1] = False  # one real item
    mask[2, : length // 2] = False
    x = x * mask.unsqueeze(-1)
    with torch.no_grad():
        want = lru_sequential_scan(lru.inputs(x, mask), lru.lam())[:, -1]
        torch.testing.assert_close(lru.last_state(x, mask), want, rtol=1e-10, atol=1e-12)
        full = lru_sequential_scan(lru.inputs(x, None), lru.lam())[:, -1]
        torch.testing.assert_close(lru.last_state(x, None), full, rtol=1e-10, atol=1e-12)
        items = torch.randint(1, 30, (4, length)) * mask
        batch = SequenceBatch(items=items, mask=mask)
        torch.testing.assert_close(enc.encode_last(batch), enc(batch)[:, -1])


def _model() -> LRURec:
    return fitted(LRURec, SMALL)


def test_stream_matches_recommend_after_every_event():
    model = _model()
    seqs, *_ = _data()
    raw = list(model.vocab.decode(seqs.row(3)))[: model.config.max_len]
    session = model.stream(raw[:3])
    first = model.update(session, [], k=7)
    assert first.items == model.recommend([raw[:3]], k=7)[0].items
    for t in range(3, len(raw)):
        rec = model.update(session, [raw[t]], k=7)
        expect = model.recommend([raw[: t + 1]], k=7)[0]
        assert rec.items == expect.items
        np.testing.assert_allclose(rec.scores, expect.scores, rtol=1e-4, atol=1e-4)
        assert not set(rec.items) & set(raw[: t + 1])
    assert session.n_events == len(raw)


def test_stream_edge_cases():
    model = _model()
    session = model.stream([])
    rec = model.update(session, ["not-an-item"], k=5)
    assert rec.fallback == "popularity" and rec.skipped_unknown == 1 and len(rec.items) == 5
    known = model.vocab.decode(np.array([1]))[0]
    rec = model.update(session, [known], k=5, exclude_seen=False)
    assert rec.fallback is None and session.n_events == 1
    with pytest.raises(DataError, match="k must be"):
        model.update(session, [], k=0)
    with pytest.raises(NotFittedError):
        LRURec(model_settings(LRURecConfig, **SMALL)).stream([known])


def test_forward_skips_all_pad_columns_exactly():
    enc = _encoder(double=True)
    items = torch.tensor([[0, 0, 0, 3, 4], [0, 0, 5, 6, 7]])
    mask = items != 0
    with torch.no_grad():
        out = enc(SequenceBatch(items=items, mask=mask))
        full, _ = enc.encode(items, mask)  # no skipping
    assert out.shape == (2, 5, 8) and torch.all(out[:, :2] == 0)
    torch.testing.assert_close(out[mask], full[mask], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("groups", [2, 4, 16])
def test_length_groups_compute_the_whole_window(training, groups):
    """Rows cut into groups of similar length, each on its own cut window: the whole window's
    outputs at the real positions and its gradients (float64, no dropout, so both draw
    nothing), rows of every length, an empty one and more groups than rows included."""
    torch.manual_seed(3)
    lengths = [0, 1, 2, 3, 5, 8, 9, 12]
    items = torch.zeros(len(lengths), 12, dtype=torch.long)
    for row, n in enumerate(lengths):
        if n:
            items[row, -n:] = torch.randint(1, 30, (n,))
    batch = SequenceBatch(items=items, mask=items != 0)

    def run(n_groups):
        torch.manual_seed(0)
        enc = LRUEncoder(LRURecConfig(dim=8, max_len=12, dropout=0.0), 30).double()
        enc.train(training)
        enc.length_groups = n_groups
        out = enc(batch)
        assert out.shape == (len(lengths), 12, 8)
        real = out[batch.mask]
        (
            real * torch.linspace(-1, 1, real.numel(), dtype=real.dtype).view_as(real)
        ).sum().backward()
        return real.detach(), {n: p.grad for n, p in enc.named_parameters() if p.grad is not None}

    whole, whole_grads = run(1)
    cut, cut_grads = run(groups)
    torch.testing.assert_close(cut, whole, rtol=1e-10, atol=1e-12)
    assert cut_grads.keys() == whole_grads.keys()
    for name, grad in whole_grads.items():
        torch.testing.assert_close(cut_grads[name], grad, rtol=1e-9, atol=1e-12, msg=name)


def test_weight_decay_skips_biases_and_norms_like_the_authors_code():
    from seqrec.training.trainer import _param_groups

    enc = _encoder(dim=8)
    skip = enc.no_decay_names()
    names = dict(enc.named_parameters())
    assert (
        {
            "out_bias",
            "embed_norm.weight",
            "embed_norm.bias",
            "blocks.0.lru.b_re",
            "blocks.0.lru.b_im",
            "blocks.0.lru.c",
            "blocks.1.lru.norm.weight",
            "blocks.1.ffn.w1.bias",
            "blocks.1.ffn.norm.bias",
        }
        <= skip
        <= set(names)
    )
    for decayed in (
        "embedding.weight",
        "blocks.0.lru.nu_log",
        "blocks.0.lru.gamma_log",
        "blocks.0.lru.B_re",
        "blocks.1.lru.C_im",
        "blocks.1.ffn.w2.weight",
    ):
        assert decayed not in skip
    groups = _param_groups(enc, TrainConfig.for_model(LRURecConfig))
    assert len(groups) == 2 and groups[1]["weight_decay"] == 0.0
    assert {id(p) for p in groups[1]["params"]} == {id(names[n]) for n in skip}
    assert len(groups[0]["params"]) + len(groups[1]["params"]) == len(names)
    # the old behaviour (and any model with decay off or without the grouping): one group
    assert (
        len(_param_groups(enc, model_settings(LRURecConfig, dim=8, decay_biases_and_norms=True)))
        == 1
    )
    assert len(_param_groups(enc, model_settings(LRURecConfig, dim=8, weight_decay=0.0))) == 1


def _drop(x, p):
    """Inverted dropout with the masks LRURec draws (:func:`seqrec.models.lrurec.keep_mask`)."""
    from seqrec.models.lrurec import keep_mask

    return x if p == 0.0 else x * keep_mask(x.shape, p).to(x.dtype) / (1.0 - p)


def _plain_block_forward(block, x, mask):
    """One LRU block as plain operations (nn.GELU, nn.Linear, complex inputs, dropout by
    LRURec's mask draw): the reference for the memory-lean training path."""
    lru, ffn = block.lru, block.ffn
    p = lru.dropout.p
    g = torch.exp(lru.gamma_log)
    u = torch.complex(x @ lru.B_re.T + lru.b_re, x @ lru.B_im.T + lru.b_im) * g
    u = u * mask.unsqueeze(-1)
    from seqrec.models.lru_scan import lru_sequential_scan

    h = lru_sequential_scan(u, lru.lam())
    y = (h @ torch.complex(lru.C_re, lru.C_im).T).real + lru.c
    x = lru.norm(_drop(y, p) + x)
    z = ffn.w2(_drop(ffn.act(ffn.w1(x)), p))
    return ffn.norm(x + _drop(z, p))


@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_training_path_equals_plain_modules(dropout, monkeypatch):
    """The fused, row-chunked PFFN node, the one-byte dropout masks, the folded gamma and
    the blocked scan give the plain modules' values and gradients under the same seed."""
    from seqrec.models import lrurec

    monkeypatch.setattr(lrurec, "FUSED_ROWS", 16)  # 111 rows: several chunks and a short one
    monkeypatch.setattr(lrurec, "LRU_ROWS", 74)  # the LRU node: chunks of two rows and one
    torch.manual_seed(0)
    enc = LRUEncoder(LRURecConfig(dim=8, dropout=dropout, max_len=40), 25).double().train()
    items = torch.randint(1, 26, (3, 37))
    items[0, :30] = 0  # left padding
    mask = items != 0
    x0 = torch.randn(3, 37, 8, dtype=torch.float64)
    outs, grads = [], []
    for fused in (True, False):
        torch.manual_seed(5)
        x = x0.clone().requires_grad_(True)
        block = enc.blocks[0]
        y = block.ffn(block.lru(x, mask)[0]) if fused else _plain_block_forward(block, x, mask)
        w = torch.randn_like(y, generator=torch.Generator().manual_seed(1))
        (y * w).sum().backward()
        outs.append(y.detach())
        grads.append([x.grad] + [p.grad.clone() for p in block.parameters()])
        enc.zero_grad(set_to_none=True)
    torch.testing.assert_close(outs[0], outs[1], rtol=1e-9, atol=1e-9)
    if dropout:
        assert (outs[0] != 0).all()  # a LayerNorm output: dropout masks were applied inside
    for a, b in zip(*grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize("p", [0.1, 0.2, 0.5, (51 + 0.5) / 256, 0.9])
def test_keep_mask_rate(p):
    """LRURec's dropout masks keep each element with probability 1 - p: the threshold is
    within 2^-33 of p, and the rate measured over 4M draws (and over each half, across the
    draw's chunks) is within 5 standard deviations of 1 - p; ``dropped`` is the complement
    of the same draw; the draw is 0/1 uint8 and seeded. (51.5 / 256: half the elements
    whose first byte ties the threshold's are dropped, so a wrong tie rule shows.)"""
    from seqrec.models.lrurec import keep_mask, keep_threshold

    hi, lo = keep_threshold(p)
    assert abs((hi * 2**24 + lo) / 2**32 - p) <= 2**-33
    torch.manual_seed(3)
    keep = keep_mask((1001, 4001), p)  # odd sizes, several chunks, a short last one
    assert keep.dtype == torch.uint8 and keep.shape == (1001, 4001)
    assert set(keep.unique().tolist()) <= {0, 1}
    flat = keep.reshape(-1).double()
    half = flat.numel() // 2
    for part in (flat, flat[:half], flat[half:]):
        sd = (p * (1 - p) / part.numel()) ** 0.5
        assert abs(part.mean().item() - (1 - p)) < 5 * sd, (p, part.mean().item())
    torch.manual_seed(3)
    assert torch.equal(keep_mask((1001, 4001), p), keep)
    torch.manual_seed(3)
    assert torch.equal(keep_mask((1001, 4001), p, dropped=True), 1 - keep)


def _saved_bytes(model_cls, config_cls, **kw) -> int:
    """Bytes autograd keeps for backward in one training forward + loss (distinct storages)."""
    from seqrec.models.neural_config import settings as flat

    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    items = torch.as_tensor(rng.integers(1, 51, size=(128, 201)))
    batch = SequenceBatch(items=items[:, :-1], mask=items[:, :-1] != 0, targets=items[:, 1:])
    model = model_cls(flat(config_cls, max_len=200, dim=64, n_blocks=2, dropout=0.2, **kw))
    model.encoder = model.build_encoder(50).train()
    seen: dict[int, int] = {}

    def pack(t):
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model.compute_loss({"batch": batch})
    return sum(seen.values())


def test_saved_for_backward_at_most_sasrecs():
    """At the ML-1M training shape (B 128, L 200, d 64, 2 blocks, full CE) LRURec keeps no
    more for backward than SASRec (a few rows would not do: both keep some weight-sized
    tensors, LRURec more of them)."""
    from seqrec.models.sasrec import SASRec, SASRecConfig

    lru = _saved_bytes(LRURec, LRURecConfig)
    sas = _saved_bytes(SASRec, SASRecConfig, n_heads=1)
    assert lru <= sas, (lru / 2**20, sas / 2**20)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_training_pffn_at_real_positions_only_computes_the_plain_blocks(dtype):
    """In training on CPU the fused PFFN computes only the real positions of a padded batch
    (its PAD outputs are never read): the same outputs there, the same gradients and the same
    dropout stream as computing every position."""
    import seqrec.models.lrurec as lr

    def build():
        enc = LRUEncoder(LRURecConfig(dim=8, max_len=12, dropout=0.3), 40).to(dtype).train()
        return enc

    def plain():
        fast = lr._real_rows
        lr._real_rows = lambda x, mask, training: None
        return lambda: setattr(lr, "_real_rows", fast)

    assert_same_forward_and_backward(build, padded_batch(), plain, real_only=True)
