"""benchmarks/bench_cold_items.py: the stand-in item vectors carry each item's attribute values
(items with the same values get the same vector, items without any none), and the vector arm's
split hands the model vectors in place of the attribute tokens."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from seqrec.data.attributes import ItemAttributes
from seqrec.data.splits import leave_last_out
from seqrec.testing.synthetic import markov_sequences

SCRIPT = "bench_cold_items.py"  # loaded by conftest.bench


def test_stand_in_vectors_follow_the_attribute_values(bench):
    # items 1 and 3 share (category 7, brand 2); item 2 has category 7 only; item 4 none
    attrs = ItemAttributes(
        np.array([1, 1, 2, 3, 3]),
        np.array([7, 2, 7, 7, 2]),
        np.array(["category", "brand", "category", "category", "brand"]),
        np.array([0, 1, 0, 0, 1]),
    )
    v = bench.stand_in_vectors(attrs, 4, SimpleNamespace(seed=0, vector_dim=8))
    assert v.shape == (4, 8)
    np.testing.assert_allclose(v[0], v[2])
    assert not np.allclose(v[0], v[1]) and np.isnan(v[3]).all()
    # the same seed draws the same vectors, another seed others
    np.testing.assert_array_equal(
        bench.stand_in_vectors(attrs, 4, SimpleNamespace(seed=0, vector_dim=8)), v
    )
    other = bench.stand_in_vectors(attrs, 4, SimpleNamespace(seed=1, vector_dim=8))
    assert not np.allclose(other[:3], v[:3])


def test_the_vector_arm_trains_on_vectors_not_tokens(bench):
    split = leave_last_out(markov_sequences(n_users=20, n_items=10, min_len=4, max_len=8))
    vectors = np.ones((10, 3), np.float32)
    out = bench.with_vectors(split, vectors)
    assert out.train.vocab.attributes is None and out.train.vocab.vectors is vectors
    assert split.train.vocab.attributes is not None  # the original split is untouched
    assert out.test is split.test
