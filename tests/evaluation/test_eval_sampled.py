import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seqrec.data.sequences import Sequences, Targets
from seqrec.errors import ConfigError, DataError
from seqrec.evaluation import (
    draw_candidates,
    evaluate_sampled,
    load_candidates,
    markdown_table,
    result_record,
    save_candidates,
)

from .fakes import FixedScores


def _data(n_items=30, n_users=6, seed=0):
    rng = np.random.default_rng(seed)
    rows = [
        rng.choice(np.arange(1, n_items + 1), size=rng.integers(3, 9), replace=False)
        for _ in range(n_users)
    ]
    seqs = Sequences.from_lists(rows, n_items=n_items, users=np.arange(n_users))
    cut = seqs.lengths - 1
    targets = Targets(seqs, np.arange(n_users), cut, np.array([r[-1] for r in rows]))
    return seqs, targets


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**31), st.sampled_from(["uniform", "popularity"]), st.booleans())
def test_candidates_are_valid_and_reproducible(seed, strategy, exclude_history):
    seqs, targets = _data(seed=seed % 100)
    pop = seqs.item_counts() + 1
    pop[0] = 0
    c1 = draw_candidates(
        targets, 10, strategy, popularity=pop, exclude_history=exclude_history, seed=seed
    )
    c2 = draw_candidates(
        targets, 10, strategy, popularity=pop, exclude_history=exclude_history, seed=seed
    )
    assert np.array_equal(c1.negatives, c2.negatives)
    assert c1.negatives.shape == (len(targets), 10)
    for t in range(len(targets)):
        negs = c1.negatives[t]
        assert len(set(negs.tolist())) == 10  # distinct
        assert targets.items[t] not in negs
        assert negs.min() >= 1 and negs.max() <= seqs.n_items
        if exclude_history:
            hist = seqs.row(targets.rows[t])[: targets.cutoffs[t]]
            assert not set(negs.tolist()) & set(hist.tolist())


def test_different_seeds_differ_and_popularity_zero_never_drawn():
    _, targets = _data()
    a = draw_candidates(targets, 10, seed=1)
    b = draw_candidates(targets, 10, seed=2)
    assert not np.array_equal(a.negatives, b.negatives)
    pop = np.zeros(31)
    pop[1:16] = 1.0  # only items 1..15 can be drawn
    c = draw_candidates(targets, 3, "popularity", popularity=pop, exclude_history=False, seed=0)
    assert c.negatives.max() <= 15
    assert c.label == "sampled-3-popularity"


def test_popularity_sampling_follows_counts():
    seqs = Sequences.from_lists([[1]] * 400, n_items=3, users=np.arange(400))
    targets = Targets(seqs, np.arange(400), np.zeros(400, np.int64), np.ones(400, np.int64))
    pop = np.array([0, 0, 9, 1])
    c = draw_candidates(targets, 1, "popularity", popularity=pop, exclude_history=False, seed=0)
    share = np.mean(c.negatives[:, 0] == 2)
    assert 0.85 < share < 0.95  # expected 0.9


def test_save_load_roundtrip(tmp_path):
    _, targets = _data()
    c = draw_candidates(targets, 5, seed=3)
    path = save_candidates(c, tmp_path / "cands.npz")
    d = load_candidates(path)
    assert np.array_equal(c.negatives, d.negatives)
    assert np.array_equal(c.items, d.items) and np.array_equal(c.rows, d.rows)
    assert (c.strategy, c.seed, c.n_items, c.exclude_history) == (
        d.strategy,
        d.seed,
        d.n_items,
        d.exclude_history,
    )
    with pytest.raises(DataError):
        load_candidates(tmp_path / "missing.npz")


def test_evaluate_sampled_matches_hand_ranking_and_is_labelled():
    seqs, targets = _data()
    c = draw_candidates(targets, 8, seed=0)
    rng = np.random.default_rng(5)
    scores = rng.integers(0, 4, (len(targets), seqs.n_items + 1)).astype(np.float32)
    model = FixedScores(targets, scores).fit(seqs)
    res = evaluate_sampled(model, targets, c, ks=(1, 5))
    for t in range(len(targets)):
        pos = scores[t, targets.items[t]]
        neg = scores[t, c.negatives[t]]
        assert res.ranks[t] == np.sum(neg >= pos)  # pessimistic ties
    assert res.ranking == "sampled-8-uniform"
    assert "sampled-8-uniform" in res.summary()
    assert res.metrics["HR@5"] == pytest.approx(np.mean(res.ranks < 5))
    record = result_record("fake", None, "synthetic", "abc", "leave-last-out", {"test": res}, 0)
    assert record["ranking"] == "sampled-8-uniform"
    table = markdown_table([record], metrics=("HR@5", "NDCG@5"))
    assert "sampled-8-uniform" in table and "not comparable" in table


def test_candidates_for_other_targets_and_bad_options_raise():
    seqs, targets = _data()
    c = draw_candidates(targets, 5, seed=0)
    model = FixedScores(targets, np.zeros((len(targets), seqs.n_items + 1))).fit(seqs)
    with pytest.raises(DataError, match="different targets"):
        evaluate_sampled(model, targets.subset(np.arange(3)), c)
    with pytest.raises(ConfigError, match="n_negatives"):
        evaluate_sampled(model, targets, c, ks=(10,))
    with pytest.raises(ConfigError, match="allowed: uniform, popularity"):
        draw_candidates(targets, 5, "random")
    with pytest.raises(ConfigError, match="needs popularity"):
        draw_candidates(targets, 5, "popularity")
    with pytest.raises(DataError, match="eligible"):
        draw_candidates(targets, 29, seed=0)  # histories leave fewer than 29 negatives
