"""PureSVD / PureSVD-N against a dense NumPy SVD."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seqrec.data.sequences import Sequences
from seqrec.errors import ConfigError
from seqrec.models.base import Recommender
from seqrec.models.factorization import PureSVD, PureSVDConfig
from seqrec.models.factorization.svd import binary_rows, scaling_weights


def _seqs(n_users=25, n_items=12, seed=0) -> Sequences:
    rng = np.random.default_rng(seed)
    rows = [rng.choice(n_items, size=rng.integers(1, 7), replace=False) + 1 for _ in range(n_users)]
    return Sequences.from_lists([r.tolist() for r in rows], n_items=n_items)


def _dense_scores(seqs, hist, rank, scaling, rescaled):
    x = binary_rows(seqs).toarray()
    d = scaling_weights(x.sum(0), scaling)
    v = np.linalg.svd(x * d, full_matrices=False)[2][:rank].T
    p = binary_rows(hist).toarray()
    if rescaled:  # eq. 28: D^-1 V V^T D p
        return (p * d) @ v @ v.T / d
    return p @ v @ v.T  # eq. 27


@pytest.mark.parametrize("scaling", [1.0, 0.4, 0.0])
@pytest.mark.parametrize("rescaled", [False, True])
def test_puresvd_equals_dense_svd(scaling, rescaled):
    seqs, hist = _seqs(), _seqs(n_users=5, seed=1)
    model = PureSVD(PureSVDConfig(rank=4, scaling=scaling, rescaled=rescaled, solver="svds"))
    got = model.fit(seqs).score(hist)
    assert np.isneginf(got[:, 0]).all()
    assert np.allclose(got[:, 1:], _dense_scores(seqs, hist, 4, scaling, rescaled), atol=1e-5)


def test_randomized_solver_matches_on_low_rank_data():
    rng = np.random.default_rng(2)
    blocks = [list(range(1 + 4 * b, 5 + 4 * b)) for b in range(3)]  # 3 item communities
    rows = [rng.choice(blocks[u % 3], size=3, replace=False).tolist() for u in range(30)]
    seqs = Sequences.from_lists(rows, n_items=12)
    got = PureSVD(PureSVDConfig(rank=3, scaling=0.5)).fit(seqs).score(seqs)
    assert np.allclose(got[:, 1:], _dense_scores(seqs, seqs, 3, 0.5, False), atol=1e-4)


@settings(max_examples=20, deadline=None)
@given(counts=st.lists(st.integers(0, 50), min_size=1, max_size=8), s=st.floats(-1, 2))
def test_scaling_weights_formula(counts, s):
    d = scaling_weights(np.array(counts), s)
    for c, w in zip(counts, d, strict=True):
        assert w == pytest.approx(c ** ((s - 1) / 2) if c > 0 else 1.0)


def test_plain_puresvd_ignores_rescaled_flag():
    seqs = _seqs(seed=3)
    a = PureSVD(PureSVDConfig(rank=3, rescaled=False)).fit(seqs).score(seqs)
    b = PureSVD(PureSVDConfig(rank=3, rescaled=True)).fit(seqs).score(seqs)
    assert np.allclose(a, b, atol=1e-6)


def test_truncated_equals_refit_at_lower_rank():
    seqs = _seqs(seed=4)
    full = PureSVD(PureSVDConfig(rank=6, scaling=0.2, solver="svds")).fit(seqs)
    small = PureSVD(PureSVDConfig(rank=3, scaling=0.2, solver="svds")).fit(seqs)
    assert np.allclose(full.truncated(3).score(seqs), small.score(seqs), atol=1e-5)


def test_save_load_keeps_scores_and_determinism(tmp_path):
    seqs = _seqs(seed=5)
    cfg = PureSVDConfig(rank=4, scaling=0.6, rescaled=True)
    model = PureSVD(cfg).fit(seqs)
    assert np.array_equal(PureSVD(cfg).fit(seqs).score(seqs), model.score(seqs))
    loaded = Recommender.load(model.save(tmp_path / "svd"))
    assert isinstance(loaded, PureSVD) and loaded.config == cfg
    assert np.array_equal(loaded.score(seqs), model.score(seqs))


@pytest.mark.parametrize(
    "kwargs", [{"rank": 0}, {"rank": 2.5}, {"scaling": float("nan")}, {"solver": "lanczos"}]
)
def test_bad_config_raises(kwargs):
    with pytest.raises(ConfigError):
        PureSVDConfig(**kwargs)
