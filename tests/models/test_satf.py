"""GA-SATF / LA-SATF: sparse operators vs dense products, HOOI invariants, folding-in."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seqrec.data.sequences import Sequences, Targets
from seqrec.errors import ConfigError
from seqrec.models.base import Recommender
from seqrec.models.factorization import hankel as hk
from seqrec.models.factorization import operators as ops
from seqrec.models.factorization.satf import GASATF, LASATF, GASATFConfig, LASATFConfig
from seqrec.models.factorization.svd import scaling_weights


def _seqs(n_users=6, n_items=10, max_len=9, seed=0) -> Sequences:
    rng = np.random.default_rng(seed)
    rows = [
        rng.choice(n_items, size=rng.integers(1, max_len), replace=False) + 1
        for _ in range(n_users)
    ]
    return Sequences.from_lists([r.tolist() for r in rows], n_items=n_items)


def _orth(rng, n, r):
    return np.linalg.qr(rng.standard_normal((n, r)))[0]


# ---------------------------------------------------------------- attention matrix


@settings(max_examples=30, deadline=None)
@given(
    size=st.integers(1, 12), decay=st.floats(0, 2), span=st.integers(0, 12), seed=st.integers(0, 99)
)
def test_banded_products_equal_dense_a(size, decay, span, seed):
    a = ops.attention_weights(size, decay, span or None)
    dense = ops.attention_dense(size, decay, span or None)
    assert np.allclose(np.diag(dense), 1.0) and np.allclose(np.triu(dense, 1), 0)
    m = np.random.default_rng(seed).standard_normal((size, 3))
    assert np.allclose(ops.attention_apply(a, m), dense @ m)
    assert np.allclose(ops.attention_apply_t(a, m), dense.T @ m)
    assert np.allclose(ops.attention_solve_t(a, m), np.linalg.solve(dense.T, m))


def test_attention_diagonals_decay_as_k_power():
    dense = ops.attention_dense(4, 1.0)
    assert dense[3, 0] == pytest.approx(1 / 4) and dense[2, 1] == pytest.approx(1 / 2)


# ---------------------------------------------------------------- positional tensor


def test_positional_tensor_puts_latest_item_last_and_truncates():
    seqs = Sequences.from_lists([[1, 2, 3, 4, 5], [6, 7]], n_items=7)
    t = ops.positional_tensor(seqs, 3)
    dense = t.dense()
    assert dense.shape == (2, 7, 3)
    # user 0 keeps 3, 4, 5 at positions 0, 1, 2; user 1 has 6, 7 at positions 1, 2
    assert dense[0, [2, 3, 4], [0, 1, 2]].tolist() == [1, 1, 1] and dense[0].sum() == 3
    assert dense[1, [5, 6], [1, 2]].tolist() == [1, 1] and dense[1].sum() == 2


@pytest.fixture
def tiny():
    seqs = _seqs()
    t = ops.positional_tensor(seqs, 5)
    d = scaling_weights(seqs.item_counts()[1:], 0.3)
    return seqs, t, t.dense(), d


@pytest.mark.parametrize("mode", [0, 1])
def test_entity_operator_equals_dense_unfolding(tiny, mode):
    _, t, x, d = tiny
    rng = np.random.default_rng(1)
    m, n, k = x.shape
    pos = rng.standard_normal((k, 2))
    if mode == 0:
        other = rng.standard_normal((n, 3))
        dense = np.einsum("ijk,j,jo,kc->ioc", x, d, other, pos).reshape(m, -1)
    else:
        other = rng.standard_normal((m, 3))
        dense = np.einsum("ijk,j,io,kc->joc", x, d, other, pos).reshape(n, -1)
    if mode == 0:  # the user mode sees D through the other factor (D V)
        args = (t, 0, other * d[:, None], pos, None)
    else:  # the item mode scales its own rows by D
        args = (t, 1, other, pos, d)
    op, explicit = ops.entity_unfolding(*args), ops.entity_unfolding_explicit(*args)
    z = rng.standard_normal(dense.shape[1])
    y = rng.standard_normal(dense.shape[0])
    assert np.allclose(op.matvec(z), dense @ z)
    assert np.allclose(op.rmatvec(y), dense.T @ y)
    assert np.allclose(op.matmat(np.eye(dense.shape[1])), dense)
    assert np.allclose(explicit, dense)


def test_position_operator_equals_dense_unfolding(tiny):
    _, t, x, d = tiny
    rng = np.random.default_rng(2)
    u, v = rng.standard_normal((x.shape[0], 3)), rng.standard_normal((x.shape[1], 4))
    dense = np.einsum("ijk,ia,j,jb->kab", x, u, d, v).reshape(x.shape[2], -1)
    op = ops.position_unfolding(t, u, v, d)
    z = rng.standard_normal(dense.shape[1])
    y = rng.standard_normal(dense.shape[0])
    assert np.allclose(op.matvec(z), dense @ z)
    assert np.allclose(op.rmatvec(y), dense.T @ y)
    assert np.allclose(ops.position_unfolding_explicit(t, u, v, d), dense)


@pytest.mark.parametrize("solver", ["gram", "randomized", "svds"])
def test_left_singular_solvers_match_dense_svd(tiny, solver):
    _, t, x, d = tiny
    rng = np.random.default_rng(3)
    other, pos = rng.standard_normal((x.shape[1], 3)), rng.standard_normal((x.shape[2], 2))
    op = ops.entity_unfolding(t, 0, other, pos)
    dense = op.matmat(np.eye(op.shape[1]))
    u = ops.left_singular(op, 3, solver, 0, lambda: dense)
    ref = np.linalg.svd(dense)[0][:, :3]
    assert np.allclose(u.T @ u, np.eye(3), atol=1e-8)
    assert np.allclose(u @ u.T, ref @ ref.T, atol=1e-6)


# ---------------------------------------------------------------- hankelization


def test_hankel_identities_equal_dense_fourth_order_tensor(tiny):
    _, t, x, d = tiny
    rng = np.random.default_rng(4)
    k_l = 2
    xh = hk.hankelize(x, k_l)  # [M, N, K_L, K_S]
    k_s = xh.shape[3]
    p_l, p_s = rng.standard_normal((k_l, 2)), rng.standard_normal((k_s, 3))
    # position compression of X~ on modes 3, 4 == X compressed by the hankel-compressed factor
    lhs = np.einsum("ijls,la,sb->ijab", xh, p_l, p_s).reshape(*x.shape[:2], -1)
    rhs = np.einsum("ijk,kq->ijq", x, hk.hankel_compress(p_l, p_s))
    assert np.allclose(lhs, rhs)
    u, v = _orth(rng, x.shape[0], 3), _orth(rng, x.shape[1], 4)
    tmat = ops.position_unfolding_explicit(t, u, v, d)
    c = tmat @ tmat.T
    core = np.einsum("ijls,ia,j,jb->lsab", xh, u, d, v)  # [K_L, K_S, r1, r2]
    mode3 = np.einsum("lsab,sc->labc", core, p_s).reshape(k_l, -1)
    mode4 = np.einsum("lsab,lc->sabc", core, p_l).reshape(k_s, -1)
    assert np.allclose(hk.local_gram(c, p_s, k_l), mode3 @ mode3.T)
    assert np.allclose(hk.series_gram(c, p_l, k_l), mode4 @ mode4.T)


# ---------------------------------------------------------------- fitted models


def _ga(**kw):
    base = dict(
        max_len=5,
        user_rank=6,
        item_rank=5,
        position_rank=2,
        attention_decay=0.7,
        scaling=0.4,
        max_iters=3,
        rescaled=True,
    )
    return GASATF(GASATFConfig(**{**base, **kw}))


def _la(**kw):
    base = dict(
        max_len=6,
        user_rank=6,
        item_rank=4,
        attention_window=3,
        attention_rank=2,
        sequences_rank=2,
        attention_decay=1.0,
        scaling=0.4,
        max_iters=3,
        rescaled=True,
    )
    return LASATF(LASATFConfig(**{**base, **kw}))


@pytest.mark.parametrize("make", [_ga, _la])
def test_fitted_factors_are_orthonormal(make):
    model = make(user_rank=4).fit(_seqs(n_users=12, seed=5))
    for name, f in model.factors.items():
        assert np.allclose(f.T @ f, np.eye(f.shape[1]), atol=1e-8), name


def test_ga_folding_in_reproduces_tucker_reconstruction():
    seqs = _seqs(seed=6)
    model = _ga().fit(seqs)
    x = ops.positional_tensor(seqs, 5).dense()
    f, a, d = model.factors, model.attention, model.scale
    big_a = ops.attention_dense(5, model.config.attention_decay)
    w_hat = ops.attention_solve_t(a, f["W"])
    y = np.einsum("ijk,j,km->ijm", x, d, big_a)  # X x2 D x3 A^T
    core = np.einsum("ijk,ia,jb,kc->abc", y, f["U"], f["V"], f["W"])
    recon = np.einsum("abc,ia,jb,kc->ijk", core, f["U"], f["V"] / d[:, None], w_hat)
    proj = (f["V"] / d[:, None]) @ (f["V"] * d[:, None]).T  # D^-1 V V^T D
    for i in range(len(seqs)):
        fold = proj @ x[i] @ big_a @ f["W"] @ w_hat.T  # eq. 14, user i folded in
        assert np.allclose(fold, recon[i], atol=1e-8)
        shifted = np.concatenate([x[i][:, 1:], np.zeros((x.shape[1], 1))], axis=1)  # P S
        expect = (proj @ shifted @ big_a @ f["W"] @ w_hat.T)[:, -1]
        assert np.allclose(model.score(seqs.select(np.array([i])))[0, 1:], expect, atol=1e-5)


def test_la_folding_in_reproduces_tucker_reconstruction():
    seqs = _seqs(seed=7)
    model = _la().fit(seqs)
    x = ops.positional_tensor(seqs, 6).dense()
    f, a, d = model.factors, model.attention, model.scale
    big_a = ops.attention_dense(3, model.config.attention_decay)
    wl_hat = ops.attention_solve_t(a, f["WL"])
    xh = hk.hankelize(x, 3)
    y = np.einsum("ijls,j,lm->ijms", xh, d, big_a)
    core = np.einsum("ijls,ia,jb,lc,se->abce", y, f["U"], f["V"], f["WL"], f["WS"])
    recon = np.einsum("abce,ia,jb,lc,se->ijls", core, f["U"], f["V"] / d[:, None], wl_hat, f["WS"])
    proj = (f["V"] / d[:, None]) @ (f["V"] * d[:, None]).T
    loc, ser = big_a @ f["WL"] @ wl_hat.T, f["WS"] @ f["WS"].T
    for i in range(len(seqs)):
        fold = np.einsum("nj,jls,lm,st->nmt", proj, xh[i], loc, ser)
        assert np.allclose(fold, recon[i], atol=1e-8)
        shifted = hk.hankelize(np.concatenate([x[i][:, 1:], np.zeros((x.shape[1], 1))], 1), 3)
        expect = np.einsum("nj,jls,lm,st->nmt", proj, shifted, loc, ser)[:, -1, -1]
        assert np.allclose(model.score(seqs.select(np.array([i])))[0, 1:], expect, atol=1e-5)


@pytest.mark.parametrize("make", [_ga, _la])
def test_solvers_agree_and_refit_is_deterministic(make):
    seqs = _seqs(n_users=15, seed=8)
    hist = seqs.select(np.arange(4))
    ref = make(user_rank=4, solver="gram").fit(seqs).score(hist)
    assert np.array_equal(ref, make(user_rank=4, solver="gram").fit(seqs).score(hist))
    for solver in ("randomized", "svds"):
        assert np.allclose(make(user_rank=4, solver=solver).fit(seqs).score(hist), ref, atol=1e-4)


@pytest.mark.parametrize("make", [_ga, _la])
def test_save_load_keeps_scores_and_new_users_fold_in(make, tmp_path):
    seqs = _seqs(n_users=15, seed=9)
    model = make(user_rank=4, rescaled=False).fit(seqs)
    new = Sequences.from_lists([[3, 1], [10, 2, 5, 7, 9, 4, 8]], n_items=10)  # unseen users
    before = model.score(new)
    assert np.isfinite(before[:, 1:]).all() and np.isneginf(before[:, 0]).all()
    loaded = Recommender.load(model.save(tmp_path / "m"))
    assert type(loaded) is type(model)
    assert np.array_equal(loaded.score(new), before)


def test_validation_early_stopping_keeps_best_iteration():
    seqs = _seqs(n_users=30, n_items=15, seed=10)
    lengths = seqs.lengths
    train = seqs.slice_rows(np.arange(len(seqs)), np.zeros(len(seqs), np.int64), lengths - 1)
    keep = np.flatnonzero(lengths > 1)
    valid = Targets(seqs, keep, lengths[keep] - 1, seqs.items[seqs.offsets[keep + 1] - 1])
    model = _ga(user_rank=4, max_iters=12, patience=3).fit(train, valid)
    scores = [h["valid_ndcg@10"] for h in model.history_]
    best = int(np.argmax(scores))
    assert model.best_iteration == best + 1
    assert len(scores) == 12 or len(scores) == best + 1 + 3
    from seqrec.evaluation import evaluate

    got = evaluate(model, valid, ks=(10,), average="interaction").metrics["NDCG@10"]
    assert got == pytest.approx(scores[best])


@pytest.mark.parametrize(
    "cls, kwargs",
    [
        (GASATFConfig, {"max_len": 1}),
        (GASATFConfig, {"position_rank": 60}),
        (GASATFConfig, {"solver": "magic"}),
        (GASATFConfig, {"attention_decay": -1.0}),
        (GASATFConfig, {"user_rank": 0}),
        (LASATFConfig, {"attention_window": 51}),
        (LASATFConfig, {"attention_rank": 3}),
        (LASATFConfig, {"sequences_rank": 50}),
        (LASATFConfig, {"patience": 0}),
    ],
)
def test_bad_config_raises(cls, kwargs):
    with pytest.raises(ConfigError):
        cls(**kwargs)


def test_rank_too_large_for_data_raises_without_clipping():
    with pytest.raises(ConfigError, match="user_rank"):
        _ga(user_rank=50, clip_ranks=False).fit(_seqs())


def test_rank_too_large_for_data_is_clipped(caplog):
    seqs = _seqs()
    model = _ga(user_rank=50).fit(seqs)
    assert model.ranks_[0] == min(len(seqs), model.config.item_rank * model.config.position_rank)
    assert model.ranks_[0] < 50 and "ranks lowered" in caplog.text
    assert np.isfinite(model.score(seqs)[:, 1:]).all()


def test_factorization_package_never_imports_torch():
    code = (
        "import sys, numpy as np; from seqrec.data.sequences import Sequences;"
        "import seqrec.models.factorization as f, seqrec.registry as r;"
        "[r.get_model(n) for n in ('pop', 'puresvd', 'ga-satf', 'la-satf')];"
        "s = Sequences.from_lists([[1, 2, 3], [2, 3, 4]], n_items=4);"
        "f.LASATF(f.LASATFConfig(max_len=3, user_rank=2, item_rank=2, attention_window=2,"
        "attention_rank=1, sequences_rank=1, max_iters=1)).fit(s).score(s);"
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_paper_grid_names_real_config_fields_with_valid_values():
    from dataclasses import fields, replace

    from seqrec.models.factorization import PAPER_GRID, PureSVDConfig

    for name, cfg in (
        ("puresvd", PureSVDConfig()),
        ("ga-satf", GASATFConfig()),
        ("la-satf", LASATFConfig(attention_window=10, max_len=50)),
    ):
        known = {f.name for f in fields(cfg)}
        assert set(PAPER_GRID[name]) <= known, name
        for key, values in PAPER_GRID[name].items():
            if key in ("attention_rank", "sequences_rank", "attention_window"):
                continue  # coupled: rank <= window is checked by the config
            for value in values:
                replace(cfg, **{key: value})  # every grid value is a valid setting
