import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from seqrec.data.batching import SequenceBatch
from seqrec.data.sequences import Sequences
from seqrec.errors import ConfigError
from seqrec.models.hstu import HSTU, HSTUConfig, HSTUEncoder
from seqrec.models.hstu_bias import (
    RelativeBucketedTimeAndPositionBias,
    bucketize,
    query_time_diffs,
    time_buckets,
)
from seqrec.models.neural_config import settings as model_settings
from seqrec.testing import conformance
from seqrec.testing.conformance import ConformanceSuite
from seqrec.testing.same_path import assert_same_forward_and_backward, padded_batch


class TestHSTUConformance(ConformanceSuite):
    model_cls = HSTU
    config_kwargs = {"dim": 16, "n_blocks": 2, "n_heads": 2, "dropout": 0.1}
    bad_configs = [
        {"dim": 0},
        {"n_heads": 0},
        {"dropout": 1.5},
        {"rab_time_query": "prev"},
        {"time_bucket_fn": "exp"},
        {"temperature": 0.0},
        {"d_qk": -1},
        {"num_time_buckets": 0},
        {"positions": "from_left"},
    ]


class TestHSTUPositionsFromStart(ConformanceSuite):
    """Positions counted from the oldest item of the window (Meta's reference): the live
    sessions' key/value cache applies (``test_incremental_parity``), with the input-side time
    embedding and one shared rab."""

    model_cls = HSTU
    config_kwargs = {
        "dim": 16,
        "n_blocks": 2,
        "n_heads": 2,
        "positions": "from_start",
        "time_embedding": True,
        "rab_shared": True,
    }
    test_all_losses = None
    test_bad_configs = None
    test_seeded_refit = None
    test_exclude_seen = None
    test_learns = None


# --- variants: encoder-level conformance checks only (fast) -------------------------------
VARIANTS = [
    {"rab_time_query": "next", "allow_target_time": True},
    {"rab_shared": True, "position_embedding": False},
    {"time_embedding": True, "time_bucket_fn": "sqrt", "time_bucket_divisor": 1.0},
    {"l2_norm": True, "temperature": 0.05, "d_qk": 3, "d_v": 5},
    {"rab": False},
    {"positions": "from_start", "l2_norm": True},
]


@pytest.mark.parametrize("extra", VARIANTS)
def test_variants_causal_and_padding(extra):
    kw = {"dim": 12, "n_blocks": 2, "n_heads": 2, **extra}
    conformance.check_no_causal_leakage(HSTU, kw)
    conformance.check_padding_invariance(HSTU, kw)


# --- rab ----------------------------------------------------------------------------------
def test_rab_shapes():
    rab = RelativeBucketedTimeAndPositionBias(
        max_len=10, n_heads=3, num_time_buckets=16, use_time=True
    )
    assert rab(7).shape == (1, 3, 7, 7)
    ts = torch.cumsum(torch.randint(0, 10_000, (4, 7)), 1)
    diffs = ts[:, -1:] - ts
    assert rab(7, diffs).shape == (4, 3, 7, 7)
    # the relative position part depends on i - j only
    pos = rab(7)[0]
    assert torch.equal(pos[:, 3, 1], pos[:, 5, 3]) and torch.equal(pos[:, 1, 3], pos[:, 4, 6])
    assert not torch.equal(pos[:, 3, 1], pos[:, 1, 3])
    with pytest.raises(ValueError):
        rab(11)
    no_time = RelativeBucketedTimeAndPositionBias(10, 3, 16, use_time=False)
    assert no_time(7, diffs).shape == (1, 3, 7, 7)


def test_bucketize_semantics():
    minutes = torch.tensor([0, 30, 60, 4 * 60, 9 * 60, 10**9])  # seconds below
    got = bucketize(minutes, num_buckets=20, fn="sqrt", divisor=1.0)
    # dt in minutes: 0, 0.5, 1, 4, 9 -> sqrt: 0, 0.7, 1, 2, 3; huge -> clamped to 20
    assert got.tolist() == [0, 0, 1, 2, 3, 20]
    e = math.exp(1.0)
    secs = torch.tensor([0, 59, 60, int(60 * e**2) + 1, int(60 * e**5) + 1])
    assert bucketize(secs, 128, "log", 1.0).tolist() == [0, 0, 0, 2, 5]
    assert torch.equal(bucketize(-secs, 128, "log", 1.0), bucketize(secs, 128, "log", 1.0))
    assert bucketize(secs, 3, "log", 1.0).max().item() == 3


@settings(max_examples=10, deadline=None)
@given(shift=st.integers(-(10**9), 10**9), mode=st.sampled_from(["self", "next"]))
def test_time_shift_changes_nothing(shift, mode):
    g = torch.Generator().manual_seed(3)
    ts = 1_500_000_000 + torch.cumsum(torch.randint(0, 10**6, (3, 6), generator=g), 1)
    mask = torch.ones(3, 6, dtype=torch.bool)
    mask[1, :2] = False
    qt = ts[:, -1] + 500
    a = time_buckets(*query_time_diffs(ts, mask, qt, mode), 64, "log", 0.301)
    b = time_buckets(*query_time_diffs(ts + shift, mask, qt + shift, mode), 64, "log", 0.301)
    assert torch.equal(a, b)
    enc = _encoder({"rab_time_query": mode, "time_embedding": True, "allow_target_time": True})
    items = torch.randint(1, 20, (3, 6), generator=g) * mask
    out_a = enc(SequenceBatch(items, mask, ts * mask, query_times=qt))
    out_b = enc(SequenceBatch(items, mask, (ts + shift) * mask, query_times=qt + shift))
    torch.testing.assert_close(out_a, out_b, rtol=0, atol=0)


def test_time_bias_matters_and_position_only_fallback():
    enc = _encoder({})
    items = torch.randint(1, 20, (2, 6))
    mask = torch.ones_like(items, dtype=torch.bool)
    ts = torch.tensor([[0, 60, 120, 180, 240, 300]] * 2) + 1_000_000
    slow = ts.clone()
    slow[0] = slow[0] * 0 + torch.tensor([0, 10**5, 10**6, 10**7, 2 * 10**7, 3 * 10**7])
    with torch.no_grad():
        enc.rabs[0].ts_w.normal_(0, 1.0)
        enc.rabs[1].ts_w.normal_(0, 1.0)
        a = enc(SequenceBatch(items, mask, ts))
        b = enc(SequenceBatch(items, mask, slow))
        c = enc(SequenceBatch(items, mask, None))  # position-only rab
    assert (a[0] - b[0]).abs().max() > 1e-4  # time differences change row 0
    torch.testing.assert_close(a[1], b[1])
    assert c.shape == a.shape and torch.isfinite(c).all()


def test_bucket_gather_gradient_matches_embedding():
    rab = RelativeBucketedTimeAndPositionBias(8, 2, 10, use_time=True)
    buckets = torch.randint(0, 11, (3, 5, 5))
    up = torch.randn(3, 2, 5, 5)
    (rab.time_bias(buckets) * up).sum().backward()
    table = rab.ts_w.detach().clone().requires_grad_()
    ref = F.embedding(buckets, table).permute(0, 3, 1, 2)
    torch.testing.assert_close(ref, rab.time_bias(buckets))
    (ref * up).sum().backward()
    torch.testing.assert_close(rab.ts_w.grad, table.grad, rtol=1e-5, atol=1e-5)


# --- batched encoder == plain per-sequence loop -----------------------------------------
def _encoder(extra, n_items=20, **base):
    cfg = model_settings(
        HSTUConfig,
        **{
            "max_len": 8,
            "dim": 12,
            "n_blocks": 2,
            "n_heads": 2,
            "d_qk": 4,
            "d_v": 3,
            "dropout": 0.0,
            **base,
            **extra,
        },
    )
    torch.manual_seed(0)
    enc = HSTUEncoder(cfg, n_items)
    with torch.no_grad():  # non-trivial biases so that a wrong index would show
        for r in enc.rabs:
            r.pos_w.normal_(0, 0.5)
            if r.ts_w is not None:
                r.ts_w.normal_(0, 0.5)
    return enc.eval()


def _reference(enc: HSTUEncoder, items: list[int], times: list[int], query_time: int | None):
    """One unpadded sequence, every sum written as a loop over positions."""
    c = enc.config
    n, big_n = len(items), c.max_len
    x = torch.stack(
        [
            enc.item_emb.weight[it] * math.sqrt(c.dim)
            + (enc.pos_emb.weight[big_n - n + i] if enc.pos_emb is not None else 0.0)
            for i, it in enumerate(items)
        ]
    )
    if enc.time_emb is not None:
        gaps = [0] + [times[i] - times[i - 1] for i in range(1, n)]
        x = (
            x
            + enc.time_emb.weight[
                bucketize(
                    torch.tensor(gaps), c.num_time_buckets, c.time_bucket_fn, c.time_bucket_divisor
                )
            ]
        )

    def qtime(i):
        if c.rab_time_query == "self":
            return times[i]
        if i + 1 < n:
            return times[i + 1]
        return times[-1] if query_time is None else query_time

    for li, layer in enumerate(enc.layers):
        rab = enc.rabs[0 if c.rab_shared else li] if enc.rabs else None
        h, dqk, dv = layer.n_heads, layer.d_qk, layer.d_v
        uvqk = F.silu(layer.proj1(layer.norm_in(x)))
        u, v, q, k = torch.split(uvqk, [h * dv, h * dv, h * dqk, h * dqk], dim=-1)
        av = torch.zeros(n, h * dv)
        for head in range(h):
            qh, kh = q[:, head * dqk : (head + 1) * dqk], k[:, head * dqk : (head + 1) * dqk]
            vh = v[:, head * dv : (head + 1) * dv]
            for i in range(n):
                acc = torch.zeros(dv)
                for j in range(i + 1):
                    s = (qh[i] @ kh[j]) / math.sqrt(dqk)
                    if rab is not None:
                        s = s + rab.pos_w[head, i - j + big_n - 1]
                        if rab.ts_w is not None and times is not None:
                            b = bucketize(
                                torch.tensor(qtime(i) - times[j]),
                                c.num_time_buckets,
                                c.time_bucket_fn,
                                c.time_bucket_divisor,
                            )
                            s = s + rab.ts_w[b, head]
                    acc = acc + F.silu(s) / big_n * vh[j]
                av[i, head * dv : (head + 1) * dv] = acc
        x = x + layer.proj2(layer.norm_attn(av) * u)
    if c.l2_norm:
        x = F.normalize(x, dim=-1)
    return x


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"rab_time_query": "next", "allow_target_time": True},
        {"rab_shared": True, "time_embedding": True},
        {"position_embedding": False, "time_bucket_fn": "sqrt", "time_bucket_divisor": 2.0},
        {"rab": False, "l2_norm": True},
    ],
)
def test_batched_equals_reference_loop(extra):
    enc = _encoder(extra)
    rng = np.random.default_rng(0)
    lengths = [8, 5, 1, 3]
    rows = [rng.integers(1, 21, size=n).tolist() for n in lengths]
    times = [np.cumsum(rng.integers(0, 10**6, size=n)).tolist() for n in lengths]
    qts = np.array([t[-1] + 7_000 for t in times])
    seqs = Sequences.from_lists(rows, n_items=20, timestamps=times)
    from seqrec.data.batching import inference_batch

    batch = inference_batch(seqs, 8, qts)
    with torch.no_grad():
        out = enc(batch)
        for r, n in enumerate(lengths):
            ref = _reference(enc, rows[r], times[r], int(qts[r]))
            torch.testing.assert_close(out[r, 8 - n :], ref, rtol=1e-4, atol=1e-5)
            assert torch.all(out[r, : 8 - n] == 0)  # PAD rows zeroed
    if extra.get("rab_time_query") == "next":  # without query times: the last time is used
        with torch.no_grad():
            out = enc(inference_batch(seqs, 8, None))
            for r, n in enumerate(lengths):
                ref = _reference(enc, rows[r], times[r], None)
                torch.testing.assert_close(out[r, 8 - n :], ref, rtol=1e-4, atol=1e-5)


def test_position_only_equals_reference_without_times():
    enc = _encoder({})
    rows = [[3, 4, 5, 6], [7, 8]]
    batch_items = torch.tensor([[0, 0, 0, 0, 3, 4, 5, 6], [0] * 6 + [7, 8]])
    with torch.no_grad():
        out = enc(SequenceBatch(batch_items, batch_items != 0))
        for r, row in enumerate(rows):
            torch.testing.assert_close(
                out[r, 8 - len(row) :], _reference(enc, row, None, None), rtol=1e-4, atol=1e-5
            )


# --- wrapper ------------------------------------------------------------------------------
def test_next_mode_training_batch_carries_last_target_time():
    seqs = Sequences.from_lists(
        [[1, 2, 3, 4], [5, 6, 7]], n_items=9, timestamps=[[10, 20, 30, 40], [5, 6, 700]]
    )
    model = HSTU(HSTUConfig(max_len=5, dim=8, rab_time_query="next", allow_target_time=True))
    model._remember_catalogue(seqs)
    batch = model.make_batch(seqs, np.array([0, 1]), np.random.default_rng(0))["batch"]
    assert batch.query_times.tolist() == [40, 700]
    assert batch.timestamps[:, -1].tolist() == [30, 6]
    plain = HSTU(HSTUConfig(max_len=5, dim=8))
    assert (
        plain.make_batch(seqs, np.array([0]), np.random.default_rng(0))["batch"].query_times is None
    )


def test_output_embeddings_l2_and_temperature():
    enc = _encoder({"l2_norm": True, "temperature": 0.05})
    w, b = enc.output_embeddings()
    assert b is None
    norms = w[1:].norm(dim=-1)
    torch.testing.assert_close(norms, torch.full_like(norms, 20.0))
    assert torch.all(w[0] == 0)


def test_config_errors_are_typed():
    with pytest.raises(ConfigError, match="rab_time_query"):
        HSTUConfig(rab_time_query="later")
    with pytest.raises(ConfigError, match="dim must be >= n_heads"):
        HSTUConfig(dim=2, n_heads=4)


def test_the_target_time_query_is_refused_unless_allowed():
    """rab_time_query='next' reads the target's own timestamp: a leak under offline evaluation."""
    with pytest.raises(ConfigError, match="leaks the answer"):
        HSTUConfig(rab_time_query="next")
    assert HSTUConfig(rab_time_query="next", allow_target_time=True).allow_target_time
    HSTUConfig(rab_time_query="next", rab_time=False)  # positions only: no time read, no leak


@pytest.mark.parametrize(
    "extra",
    [
        {"rab_time": False},
        {"rab_shared": True},
        {"l2_norm": True, "temperature": 0.05},
        {"rab": False, "dtype": torch.float64},
        {"times": True},
    ],
    ids=["positions", "shared-rab", "l2", "no-rab-f64", "time-rab"],
)
def test_training_at_real_positions_is_the_plain_forward(extra):
    """In training on CPU the layers run their position-wise work at the real positions only
    (``HSTULayer.forward_rows``): the same outputs, gradients and dropout stream as the plain
    layers on a padded batch."""
    extra = dict(extra)
    dtype = extra.pop("dtype", torch.float32)
    batch = padded_batch(width=8)
    if extra.pop("times", False):
        steps = torch.randint(
            1, 5000, batch.items.shape, generator=torch.Generator().manual_seed(1)
        )
        batch = SequenceBatch(items=batch.items, mask=batch.mask, timestamps=steps.cumsum(1))
    cfg = model_settings(
        HSTUConfig,
        **{"max_len": 8, "dim": 12, "n_blocks": 2, "n_heads": 2, "dropout": 0.3, **extra},
    )

    def build():
        enc = HSTUEncoder(cfg, 40).to(dtype).train()
        with torch.no_grad():  # non-trivial biases, so that a misplaced one would show
            for r in enc.rabs:
                r.pos_w.normal_(0, 0.5)
        assert enc._rows_path(batch.items.float(), batch.mask)  # the fast path is taken
        return enc

    def plain():
        fast = HSTUEncoder._rows_path
        HSTUEncoder._rows_path = lambda self, x, mask: False
        return lambda: setattr(HSTUEncoder, "_rows_path", fast)

    assert_same_forward_and_backward(build, batch, plain)


def test_real_positions_path_is_off_in_eval_and_on_full_windows():
    enc = _encoder({"rab_time": False}, n_items=40)
    batch = padded_batch(width=8)
    x = batch.items.float()
    assert not enc.eval()._rows_path(x, batch.mask)
    assert not enc.train()._rows_path(x, torch.ones_like(batch.mask))
    assert enc.train()._rows_path(x, batch.mask)
