import numpy as np
import pytest
import torch

from seqrec.data.batching import SequenceBatch
from seqrec.data.sequences import Sequences
from seqrec.errors import ConfigError
from seqrec.models.fmlprec import prefix_samples
from seqrec.models.neural_config import TrainConfig, settings
from seqrec.models.tvrec import TimeVariantFilter, TVRec, TVRecConfig, TVRecEncoder, shift_taps
from seqrec.testing import conformance as C
from seqrec.testing.conformance import ConformanceSuite
from seqrec.testing.same_path import assert_same_forward_and_backward, padded_batch


class TestTVRecConformance(ConformanceSuite):
    model_cls = TVRec
    config_kwargs = {"dim": 16, "n_blocks": 2, "dropout": 0.1, "n_basis": 4, "order": 12}
    bad_configs = [
        {"dim": 0},
        {"n_blocks": 0},
        {"dropout": 1.0},
        {"n_basis": 0},
        {"order": 0},
        {"ortho_weight": -1.0},
        {"train_windows": "sliding"},
    ]


def _graph_fourier_operator(layer: TimeVariantFilter, length: int, order: int) -> torch.Tensor:
    """The official construction: eigendecomposition of the cycle-graph shift A (N nodes),
    H_hat[t, n] = sum_k H[t, k] lambda_n^k, operator Re(V (.) H_hat V^-1), first L rows/cols."""
    n = length + order - 1
    a = torch.zeros(n, n, dtype=torch.complex128)
    a[0, -1] = 1
    a[torch.arange(1, n), torch.arange(n - 1)] = 1
    lam, v = torch.linalg.eig(a)
    powers = torch.stack([lam**k for k in range(order + 1)], dim=1)  # [N, K + 1]
    b = torch.view_as_complex(layer.basis.detach().double().contiguous())
    h = layer.coef.detach().double().to(torch.complex128) @ (b / b.norm(dim=1, keepdim=True))
    op = (v * (h @ powers.T)) @ torch.linalg.inv(v)
    return op.real[:length, :length]


@pytest.mark.parametrize(("length", "order"), [(6, 6), (5, 3), (4, 7)])
def test_filter_equals_the_graph_fourier_form(length, order):
    torch.manual_seed(0)
    cfg = TVRecConfig(max_len=length, dim=3, n_basis=3, order=order, dropout=0.0)
    layer = TimeVariantFilter(length, cfg).double()
    ref = _graph_fourier_operator(layer, length, order)
    assert torch.allclose(layer.matrix(), ref, atol=1e-9)
    x = torch.randn(2, length, 3, dtype=torch.float64)
    y = torch.einsum("ts,bsd->btd", layer.matrix(), x)
    assert torch.allclose(y, torch.einsum("ts,bsd->btd", ref, x), atol=1e-9)


def test_filter_is_a_causal_time_variant_convolution_but_for_the_wrap_at_position_zero():
    """y[t] = sum_k h[t, k] x[t - k]; output 0 also sees x[L - 1] through tap K, whatever K
    (the padding to L + K - 1 nodes is one short: (0 - K) mod (L + K - 1) = L - 1)."""
    length = 5
    for order in (2, 5, 7):
        s = shift_taps(length, order=order)
        for t in range(length):
            for k in range(order + 1):
                src = s[t, k].nonzero().flatten().tolist()
                if k <= t:
                    assert src == [t - k]
                elif (t, k) == (0, order):
                    assert src == [length - 1]
                else:
                    assert src == []


def test_taps_differ_per_position():
    torch.manual_seed(0)
    layer = TimeVariantFilter(6, TVRecConfig(max_len=6, dim=2, n_basis=2, order=6))
    h = layer.taps()
    assert h.shape == (6 + 6 - 1, 7) and not torch.allclose(h[0], h[1])


def test_pad_positions_are_zeroed_so_the_pad_row_does_not_matter():
    torch.manual_seed(0)
    enc = TVRecEncoder(TVRecConfig(max_len=6, dim=8, dropout=0.0, n_basis=2, order=6), 9).eval()
    items = torch.tensor([[0, 0, 3, 4, 5, 6]])
    batch = SequenceBatch(items=items, mask=items.ne(0))
    a = enc(batch)
    with torch.no_grad():
        enc.item_emb.weight[0] += torch.randn(8)
    assert torch.allclose(a, enc(batch), atol=1e-6)


def test_output_at_the_first_position_sees_the_last_item():
    torch.manual_seed(0)
    enc = TVRecEncoder(TVRecConfig(max_len=6, dim=8, dropout=0.0, n_basis=2, order=6), 9).eval()
    a = torch.tensor([[1, 2, 3, 4, 5, 6]])
    b = a.clone()
    b[0, -1] = 9
    out_a, out_b = (enc(SequenceBatch(items=x, mask=x.ne(0))) for x in (a, b))
    assert not torch.allclose(out_a[:, 0], out_b[:, 0])  # why TVRec.causal is False
    one = TVRecEncoder(
        TVRecConfig(max_len=6, dim=8, dropout=0.0, n_basis=2, order=6, n_blocks=1), 9
    ).eval()
    out_a, out_b = (one(SequenceBatch(items=x, mask=x.ne(0))) for x in (a, b))
    assert torch.allclose(out_a[:, 1:-1], out_b[:, 1:-1])  # one block: only position 0 leaks


def test_prefix_samples_without_the_empty_one_are_the_official_ones():
    rows = [[1, 2, 3], [4, 5, 6, 7, 8, 9], [7]]
    train = Sequences.from_lists(rows, n_items=9)
    row, at, n = prefix_samples(train, max_len=4, empty=False)
    got = [
        (int(r), list(train.items[a - k : a]), int(train.items[a]))
        for r, a, k in zip(row, at, n, strict=True)
    ]
    ref = []  # RecDataset (train): input_ids = seq[-(max_len + 1):], prefixes of >= 2 items
    for r, seq in enumerate(rows):
        window = seq[-(4 + 1) :]
        ref += [(r, window[:i], window[i]) for i in range(1, len(window))]
    assert got == ref


def test_defaults_are_the_official_recipe_but_the_width_measured_best():
    config = TVRecConfig()
    train = TrainConfig.for_model(TVRecConfig)
    assert (config.dim, config.n_blocks, config.dropout, config.n_basis) == (128, 2, 0.5, 32)
    assert (train.lr, train.batch_size, train.val_metric) == (5e-4, 256, "NDCG@20")


def test_parameter_count_is_the_official_one():
    """The official Sports log: 1,248,160 parameters (d 64, M 16, K 50, 18,357 items + PAD)."""
    enc = TVRecEncoder(TVRecConfig(dim=64, n_basis=16), n_items=18357)
    assert sum(p.numel() for p in enc.parameters()) == 1_248_160


def test_ortho_penalty_is_added_to_the_loss():
    _, train, _, _ = C._data()
    kw = {**C.TINY, "dim": 8, "n_basis": 3, "order": 12, "dropout": 0.0, "epochs": 1}
    losses = []
    for w in (0.0, 0.5):
        model = TVRec(settings(TVRecConfig, **kw, ortho_weight=w)).fit(train, None, progress=False)
        windows, model._row_source, ids = model.training_rows(train)
        data = model.make_batch(windows, ids[:16], np.random.default_rng(0))
        model.encoder.eval()
        with torch.no_grad():
            losses.append((model, float(model.compute_loss(data)), data))
    model, loss, data = losses[1]
    with torch.no_grad():
        pen = float(model.encoder.ortho_penalty())
    model.config = TVRecConfig(**{**model.config.__dict__, "ortho_weight": 0.0})
    with torch.no_grad():
        assert loss == pytest.approx(float(model.compute_loss(data)) + 0.5 * pen, rel=1e-5)
    assert pen > 0


def test_sliding_windows_are_rejected():
    with pytest.raises(ConfigError, match="train_windows"):
        settings(TVRecConfig, train_windows="sliding")


@pytest.mark.parametrize("train", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_ffn_at_real_positions_only_computes_the_plain_blocks(train, dtype):
    """Every block but the last runs its FFN at the real positions only (its PAD outputs are
    zeroed before the next block reads them): the same outputs, gradients and dropout stream
    as the plain blocks (on the whole window: in length groups the products' shapes differ,
    and so may their rounding)."""
    import seqrec.models.tvrec as tv

    cfg = TVRecConfig(dim=16, max_len=12, n_basis=4, order=5, dropout=0.3, n_blocks=3)

    def plain():
        fast = tv._rows_path
        tv._rows_path = lambda block: False
        return lambda: setattr(tv, "_rows_path", fast)

    def build():
        enc = TVRecEncoder(cfg, 40).to(dtype).train(train)
        enc.last_groups = 1
        return enc

    assert_same_forward_and_backward(build, padded_batch(), plain, last_only=True)


def _left_padded(rows: int, width: int, n_items: int, seed: int) -> SequenceBatch:
    g = torch.Generator().manual_seed(seed)
    n = torch.randint(0, width + 1, (rows,), generator=g)
    n[0], n[1] = 0, width  # an empty row and a full one
    items = torch.randint(1, n_items + 1, (rows, width), generator=g)
    items[torch.arange(width)[None] < (width - n)[:, None]] = 0
    return SequenceBatch(items=items, mask=items.ne(0))


@pytest.mark.parametrize("width", [16, 9])
@pytest.mark.parametrize("groups", [2, 4, 40])
def test_length_groups_compute_the_whole_window(width, groups):
    """A last-position batch cut into groups of similar length, each on the window cut to its
    longest row, gives the whole window's outputs and gradients (no dropout: the masks are drawn
    per group), for batches narrower than max_len too; rows come back in their order."""
    cfg = TVRecConfig(dim=8, max_len=16, n_basis=3, order=16, dropout=0.0, n_blocks=2)
    batch = _left_padded(23, width, 30, seed=width + groups)

    def run(n_groups: int):
        torch.manual_seed(0)
        enc = TVRecEncoder(cfg, 30).double().train()
        for p in enc.parameters():  # away from the tiny official init, so every weight matters
            torch.nn.init.normal_(p, 0.0, 0.3)
        enc.last_groups = n_groups
        out = enc(batch, last_only=True)
        (out * torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)).sum().backward()
        return out.detach(), {n: p.grad for n, p in enc.named_parameters()}

    (want, want_grads), (got, got_grads) = run(1), run(groups)
    assert got.shape == (23, 1, 8)
    torch.testing.assert_close(got, want)
    for name, g in want_grads.items():
        torch.testing.assert_close(got_grads[name], g, msg=name)


def test_length_groups_are_not_used_for_every_position():
    """Outputs at every position (``last_only=False``) run on the whole window."""
    cfg = TVRecConfig(dim=8, max_len=10, n_basis=3, order=10, dropout=0.0)
    enc = TVRecEncoder(cfg, 30).eval()
    batch = _left_padded(7, 10, 30, seed=1)
    with torch.no_grad():
        out = enc(batch)
        enc.last_groups = 1
        torch.testing.assert_close(enc(batch, last_only=True)[:, 0], out[:, -1])
    assert out.shape == (7, 10, 8)
    enc.last_groups = 4
    empty = SequenceBatch(items=torch.zeros(0, 10, dtype=torch.long), mask=None)
    assert enc(empty, last_only=True).shape == (0, 1, 8)
