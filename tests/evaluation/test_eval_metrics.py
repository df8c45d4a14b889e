import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seqrec.errors import ConfigError
from seqrec.evaluation.metrics import (
    coverage,
    group_means,
    hit_rate,
    mean_ci,
    metric_names,
    mrr,
    ndcg,
    summarize,
)

ranks_st = st.lists(st.integers(0, 50), min_size=1, max_size=40).map(np.array)


def test_perfect_ranking_scores_one():
    ranks = np.zeros(17, np.int64)
    for k in (1, 5, 10):
        assert hit_rate(ranks, k).mean() == 1.0
        assert ndcg(ranks, k).mean() == 1.0
    assert mrr(ranks).mean() == 1.0


@given(ranks_st, st.integers(1, 60))
def test_metrics_match_plain_formulas(ranks, k):
    hr, nd, rr = hit_rate(ranks, k), ndcg(ranks, k), mrr(ranks)
    for r, h, n, m in zip(ranks, hr, nd, rr, strict=True):
        assert h == (1.0 if r < k else 0.0)
        assert n == pytest.approx(1.0 / math.log2(r + 2) if r < k else 0.0)
        assert m == pytest.approx(1.0 / (r + 1))
    # NDCG never exceeds HR, both monotone in k
    assert np.all(nd <= hr)
    assert np.all(hit_rate(ranks, k + 1) >= hr)
    assert np.all(ndcg(ranks, k + 1) >= nd)


def test_known_values():
    ranks = np.array([0, 1, 2, 9, 10, 100])
    assert hit_rate(ranks, 10).tolist() == [1, 1, 1, 1, 0, 0]
    assert ndcg(ranks, 10)[1] == pytest.approx(1 / math.log2(3))
    assert ndcg(ranks, 10)[3] == pytest.approx(1 / math.log2(11))
    assert mrr(ranks)[5] == pytest.approx(1 / 101)


def test_coverage_hand_example():
    top = np.array([[1, 2, 0], [2, 3, 4], [2, 1, 0]])
    assert coverage(top, 5, 1) == pytest.approx(2 / 5)  # {1, 2}
    assert coverage(top, 5, 2) == pytest.approx(3 / 5)  # {1, 2, 3}
    assert coverage(top, 5, 3) == pytest.approx(4 / 5)  # {1, 2, 3, 4}; PAD 0 ignored
    with pytest.raises(ConfigError):
        coverage(top, 5, 4)


def test_group_means_and_user_vs_interaction_averaging():
    # user 7 has three hits, user 3 one miss
    ranks = np.array([0, 0, 0, 50])
    users = np.array([7, 7, 7, 3])
    assert group_means(np.array([1.0, 1.0, 1.0, 0.0]), users).tolist() == [0.0, 1.0]
    per_interaction, _ = summarize(ranks, (10,))
    per_user, _ = summarize(ranks, (10,), users)
    assert per_interaction["HR@10"] == pytest.approx(0.75)
    assert per_user["HR@10"] == pytest.approx(0.5)
    assert per_user["Recall@10"] == per_user["HR@10"]


@settings(max_examples=50)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=50))
def test_ci_contains_mean(values):
    mean, lo, hi = mean_ci(np.array(values))
    assert lo <= mean + 1e-12 and mean <= hi + 1e-12
    assert mean == pytest.approx(np.mean(values))


def test_ci_shrinks_with_n_and_matches_formula():
    rng = np.random.default_rng(0)
    small = (rng.random(100) < 0.3).astype(float)
    large = (rng.random(10_000) < 0.3).astype(float)
    m, lo, hi = mean_ci(small)
    assert hi - m == pytest.approx(1.959964 * small.std(ddof=1) / 10, rel=1e-5)
    _, lo2, hi2 = mean_ci(large)
    assert hi2 - lo2 < (hi - lo) / 5
    # per-user CI is computed over users, not targets
    users = np.repeat(np.arange(50), 2)
    _, ulo, uhi = mean_ci(small, users)
    per_user = small.reshape(50, 2).mean(1)
    assert (uhi - ulo) / 2 == pytest.approx(
        1.959964 * per_user.std(ddof=1) / math.sqrt(50), rel=1e-5
    )


def test_bad_inputs():
    with pytest.raises(ConfigError):
        hit_rate(np.zeros(3), 0)
    with pytest.raises(ConfigError):
        mean_ci(np.zeros(0))
    with pytest.raises(ConfigError):
        ndcg(np.zeros((2, 2)), 5)


def test_metric_names():
    assert metric_names((5, 10)) == [
        "HR@5",
        "Recall@5",
        "NDCG@5",
        "HR@10",
        "Recall@10",
        "NDCG@10",
        "MRR",
        "COV@5",
        "COV@10",
    ]
