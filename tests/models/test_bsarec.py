import numpy as np
import pytest
import torch

from seqrec.data.batching import SequenceBatch
from seqrec.data.sequences import Sequences
from seqrec.errors import ConfigError
from seqrec.models.bsarec import (
    MASKED,
    BSARec,
    BSARecConfig,
    BSARecEncoder,
    FrequencyLayer,
    attention_bias,
)
from seqrec.models.neural_config import settings
from seqrec.testing import conformance as C
from seqrec.testing.conformance import ConformanceSuite


class TestBSARecConformance(ConformanceSuite):
    model_cls = BSARec
    config_kwargs = {"dim": 16, "n_blocks": 2, "n_heads": 2, "dropout": 0.1, "attn_dropout": 0.1}
    bad_configs = [
        {"dim": 0},
        {"n_blocks": 0},
        {"dropout": 1.0},
        {"attn_dropout": 1.0},
        {"alpha": 1.5},
        {"c": 0},
        {"c": 30},  # more bins than a window of max_len 12 has
        {"n_heads": 3},
        {"train_windows": "sliding"},
    ]


def _dft(n: int) -> torch.Tensor:
    t = torch.arange(n, dtype=torch.float64)
    return torch.exp(-2j * torch.pi * t[:, None] * t[None] / n) / n**0.5  # orthonormal


@pytest.mark.parametrize("length", [7, 8, 12])
def test_low_pass_keeps_the_lowest_bins_of_a_direct_dft(length):
    """LP(x) = Re(F^H diag(m) F x) with F the orthonormal DFT and m keeping the c // 2 + 1
    lowest frequencies and their mirrored negative ones; HP = x - LP."""
    torch.manual_seed(0)
    for c in (1, 3, 5):
        layer = FrequencyLayer(length, 3, c, 0.0).double()
        x = torch.randn(2, length, 3, dtype=torch.float64)
        keep = c // 2 + 1
        freq = torch.arange(length)
        m = ((freq < keep) | (length - freq < keep)).to(torch.complex128)  # conjugate-symmetric
        f = _dft(length)
        ref = torch.einsum("ts,bsd->btd", f.conj().T @ torch.diag(m) @ f, x.to(torch.complex128))
        assert ref.imag.abs().max() < 1e-12
        assert torch.allclose(layer.low_pass(x), ref.real, atol=1e-12)
        beta2 = layer.sqrt_beta.detach().double() ** 2
        assert torch.allclose(layer.filter(x), ref.real + beta2 * (x - ref.real), atol=1e-12)
        assert not torch.allclose(ref.real, x)  # a real cut: something is filtered out


def test_filter_with_beta_one_is_the_identity():
    layer = FrequencyLayer(10, 4, 5, 0.0).double()
    with torch.no_grad():
        layer.sqrt_beta.fill_(1.0)
    x = torch.randn(3, 10, 4, dtype=torch.float64)
    assert torch.allclose(layer.filter(x), x, atol=1e-12)


def test_attention_bias_masks_future_and_pad_keys_additively():
    items = torch.tensor([[0, 0, 3, 4]])
    bias = attention_bias(items)[0, 0]
    allowed = bias == 0
    assert allowed.tolist() == [
        [False, False, False, False],
        [False, False, False, False],
        [False, False, True, False],
        [False, False, True, True],
    ]
    assert (bias[~allowed] == MASKED).all()


def test_a_query_in_the_padding_attends_causally_as_the_official_mask_does():
    """The -10000 mask shifts a fully masked row uniformly: its softmax is the unmasked causal
    one (the official behaviour; -inf would give NaN)."""
    torch.manual_seed(0)
    cfg = BSARecConfig(max_len=6, dim=8, dropout=0.0, attn_dropout=0.0)
    enc = BSARecEncoder(cfg, n_items=9).eval()
    items = torch.tensor([[0, 0, 0, 4, 5, 6]])
    out = enc(SequenceBatch(items=items, mask=items.ne(0)))
    assert torch.isfinite(out).all()


def test_encode_last_and_the_last_only_loss_match_the_full_forward():
    torch.manual_seed(0)
    cfg = BSARecConfig(max_len=8, dim=8, n_heads=2, dropout=0.0, attn_dropout=0.0)
    enc = BSARecEncoder(cfg, n_items=9).eval()
    items = torch.tensor([[0, 0, 1, 2, 3, 4, 5, 6], [0, 0, 0, 0, 0, 0, 0, 0]])
    batch = SequenceBatch(items=items, mask=items.ne(0))
    assert torch.allclose(enc.encode_last(batch), enc(batch)[:, -1], atol=1e-6)


def test_alpha_mixes_the_two_paths():
    """alpha = 1 is FMLP-like (no attention: changing the attention weights changes nothing);
    alpha = 0 is attention only (changing beta changes nothing)."""
    items = torch.tensor([[0, 1, 2, 3, 4, 5]])
    batch = SequenceBatch(items=items, mask=items.ne(0))
    for alpha, param in ((1.0, "attention.query.weight"), (0.0, "frequency.sqrt_beta")):
        torch.manual_seed(0)
        cfg = BSARecConfig(max_len=6, dim=8, dropout=0.0, attn_dropout=0.0, alpha=alpha)
        enc = BSARecEncoder(cfg, n_items=9).eval()
        a = enc(batch)
        with torch.no_grad():
            weight = enc.blocks[0].get_parameter(param)
            weight.add_(torch.randn_like(weight))
        assert torch.allclose(a, enc(batch), atol=1e-6), alpha
    torch.manual_seed(0)
    enc = BSARecEncoder(BSARecConfig(max_len=6, dim=8, dropout=0.0, alpha=0.5), 9).eval()
    a = enc(batch)
    with torch.no_grad():
        enc.blocks[0].attention.query.weight.add_(torch.randn(8, 8))  # (a constant: LN means 0)
    assert not torch.allclose(a, enc(batch))


def test_output_at_a_position_sees_later_items():
    torch.manual_seed(0)
    enc = BSARecEncoder(BSARecConfig(max_len=6, dim=8, dropout=0.0), n_items=9).eval()
    a = torch.tensor([[1, 2, 3, 4, 5, 6]])
    b = a.clone()
    b[0, -1] = 9
    out_a, out_b = (enc(SequenceBatch(items=x, mask=x.ne(0))) for x in (a, b))
    assert not torch.allclose(out_a[:, 0], out_b[:, 0])  # why BSARec.causal is False


def test_trains_on_fmlprec_prefixes_including_the_empty_one():
    rows = [[1, 2, 3], [4, 5, 6, 7, 8, 9]]
    train = Sequences.from_lists(rows, n_items=9)
    model = BSARec(BSARecConfig(max_len=4, dim=8))
    windows, source, ids = model.training_rows(train)
    assert np.array_equal(source, [0, 0, 0, 1, 1, 1, 1])
    b = model.make_batch(windows, ids, np.random.default_rng(0))["batch"]
    assert b.items.tolist()[0] == [0, 0, 0, 0] and b.targets[:, -1].tolist()[:3] == [1, 2, 3]


def test_parameter_count_is_the_official_one():
    """The official Beauty log: 878,208 parameters (d 64, 2 blocks, 12,101 items + PAD)."""
    enc = BSARecEncoder(BSARecConfig(), n_items=12101)
    assert sum(p.numel() for p in enc.parameters()) == 878_208


def test_sliding_windows_are_rejected():
    with pytest.raises(ConfigError, match="train_windows"):
        settings(BSARecConfig, train_windows="sliding")


def test_fit_learns_and_scores_finite():
    _, train, valid, _ = C._data()
    model = BSARec(settings(BSARecConfig, **{**C.TINY, "dim": 8}))
    model.fit(train, valid, progress=False)
    assert np.isfinite(model.score(valid.histories())[:, 1:]).all()
