import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seqrec.data.sequences import Sequences
from seqrec.errors import DataError
from seqrec.training.negatives import NegativeSampler


@settings(max_examples=30, deadline=None)
@given(
    rows=st.lists(st.lists(st.integers(1, 12), min_size=1, max_size=11), min_size=1, max_size=8),
    seed=st.integers(0, 1000),
)
def test_per_row_negatives_avoid_history_and_pad(rows, seed):
    seqs = Sequences.from_lists(rows, n_items=12)
    sampler = NegativeSampler(seqs)
    idx = np.arange(len(rows))
    negs = sampler.per_row(np.random.default_rng(seed), idx, (7,))
    assert negs.shape == (len(rows), 7)
    assert negs.min() >= 1 and negs.max() <= 12
    for r, row in enumerate(rows):
        assert not set(negs[r].tolist()) & set(row)


def test_nearly_full_row_uses_exact_fallback():
    seqs = Sequences.from_lists([list(range(1, 200)), [1]], n_items=200)
    negs = NegativeSampler(seqs).per_row(np.random.default_rng(0), np.array([0, 1]), (50,))
    assert np.all(negs[0] == 200)
    assert not np.any(negs[1] == 1)


def test_full_row_is_an_error():
    with pytest.raises(DataError):
        NegativeSampler(Sequences.from_lists([[1, 2, 3]], n_items=3))


def test_seeded_and_uniform():
    seqs = Sequences.from_lists([[1, 2]], n_items=10)
    s = NegativeSampler(seqs)
    a = s.per_row(np.random.default_rng(3), np.array([0]), (4000,))
    b = s.per_row(np.random.default_rng(3), np.array([0]), (4000,))
    np.testing.assert_array_equal(a, b)
    counts = np.bincount(a.ravel(), minlength=11)[3:]
    assert counts.min() > 0.7 * counts.mean()  # roughly uniform over the 8 allowed items


def test_shared_popularity_sampling_and_logq():
    seqs = Sequences.from_lists([[1, 1, 1, 1, 2]], n_items=3)
    s = NegativeSampler(seqs, popularity=np.array([0, 8, 2, 0]))
    items, logq = s.shared(np.random.default_rng(0), 2000)
    assert set(np.unique(items)) <= {1, 2}
    assert abs((items == 1).mean() - 0.8) < 0.05
    np.testing.assert_allclose(logq, np.log(np.where(items == 1, 0.8, 0.2)))
    uni, none = NegativeSampler(seqs).shared(np.random.default_rng(0), 10)
    assert none is None and uni.min() >= 1
