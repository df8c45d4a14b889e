import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seqrec.data.sequences import Sequences, Targets
from seqrec.errors import ConfigError, DataError
from seqrec.evaluation import evaluate
from seqrec.evaluation.ranking import apply_seen_filter, target_ranks, topk_items

from .fakes import FixedScores, brute_force_rank, plain_metrics

KS = (1, 3, 5)


@st.composite
def problems(draw):
    """Random sequences (items may repeat), targets with growing histories, integer scores."""
    n_items = draw(st.integers(2, 10))
    n_users = draw(st.integers(1, 5))
    rows, r_idx, cuts, items = [], [], [], []
    for u in range(n_users):
        seq = draw(st.lists(st.integers(1, n_items), min_size=2, max_size=8))
        rows.append(seq)
        cutoffs = draw(st.sets(st.integers(1, len(seq) - 1), min_size=1, max_size=3))
        for c in sorted(cutoffs):
            r_idx.append(u)
            cuts.append(c)
            items.append(seq[c])
    seqs = Sequences.from_lists(rows, n_items=n_items, users=np.arange(n_users) * 10 + 3)
    targets = Targets(seqs, np.array(r_idx), np.array(cuts), np.array(items))
    scores = np.array(
        draw(
            st.lists(
                st.lists(st.integers(0, 3), min_size=n_items + 1, max_size=n_items + 1),
                min_size=len(items),
                max_size=len(items),
            )
        ),
        dtype=np.float32,
    )
    return seqs, targets, scores


def _fitted(seqs, targets, scores):
    return FixedScores(targets, scores).fit(seqs)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    problems(),
    st.sampled_from(["history", "window", "none"]),
    st.integers(1, 4),
    st.sampled_from(["pessimistic", "optimistic"]),
    st.sampled_from(["user", "interaction"]),
)
def test_agrees_with_brute_force(problem, seen_filter, window, ties, average):
    seqs, targets, scores = problem
    model = _fitted(seqs, targets, scores)
    res = evaluate(
        model,
        targets,
        ks=KS,
        seen_filter=seen_filter,
        window=window,
        ties=ties,
        average=average,
        chunk_size=3,
        keep_topk=True,
    )
    expected = [
        brute_force_rank(
            scores[t],
            list(seqs.row(targets.rows[t])[: targets.cutoffs[t]]),
            int(targets.items[t]),
            seen_filter,
            window,
            ties,
        )
        for t in range(len(targets))
    ]
    assert res.ranks.tolist() == expected
    per_target = plain_metrics(expected, KS)
    users = seqs.users[targets.rows]
    for name, vals in per_target.items():
        if average == "interaction":
            want = np.mean(vals)
        else:
            want = np.mean(
                [
                    np.mean([v for v, u in zip(vals, users, strict=True) if u == x])
                    for x in np.unique(users)
                ]
            )
        assert res.metrics[name] == pytest.approx(want), name
        lo, hi = res.ci95[name]
        assert lo <= res.metrics[name] + 1e-12 <= hi + 2e-12
    for k in KS:
        assert res.metrics[f"Recall@{k}"] == res.metrics[f"HR@{k}"]
    assert res.n_targets == len(targets)
    assert res.n_users == len(np.unique(users))
    # top-k lists: best first, never a filtered item, consistent with the ranks
    for t in range(len(targets)):
        top = res.topk[t]
        if res.ranks[t] < min(KS[-1], seqs.n_items) and ties == "optimistic":
            assert targets.items[t] in top or np.any(
                scores[t, top[top > 0]] == scores[t, targets.items[t]]
            )
        hist = seqs.row(targets.rows[t])[: targets.cutoffs[t]]
        if seen_filter == "history":
            assert not set(top[top > 0]) & set(hist.tolist())


@settings(max_examples=25, deadline=None)
@given(problems(), st.sampled_from(["history", "window", "none"]))
def test_chunking_invariance(problem, seen_filter):
    seqs, targets, scores = problem
    runs = [
        evaluate(
            _fitted(seqs, targets, scores),
            targets,
            ks=KS,
            seen_filter=seen_filter,
            window=2,
            chunk_size=c,
            keep_topk=True,
        )
        for c in (1, 7, len(targets))
    ]
    for r in runs[1:]:
        assert np.array_equal(r.ranks, runs[0].ranks)
        assert np.array_equal(r.topk, runs[0].topk)
        assert r.metrics == runs[0].metrics


def test_perfect_model_scores_one_and_constant_model_scores_zero():
    seqs = Sequences.from_lists([[1, 2, 3], [4, 5, 6]], n_items=8, users=np.arange(2))
    targets = Targets(seqs, np.array([0, 1]), np.array([2, 2]), np.array([3, 6]))
    perfect = np.zeros((2, 9), np.float32)
    perfect[0, 3] = perfect[1, 6] = 1.0
    res = evaluate(_fitted(seqs, targets, perfect), targets, ks=(1, 5))
    assert res.metrics["HR@1"] == res.metrics["NDCG@1"] == res.metrics["MRR"] == 1.0
    constant = np.ones((2, 9), np.float32)
    pess = evaluate(_fitted(seqs, targets, constant), targets, ks=(1, 5), seen_filter="none")
    assert pess.ranks.tolist() == [7, 7]  # tied with the 7 other items
    assert pess.metrics["HR@5"] == 0.0
    opt = evaluate(
        _fitted(seqs, targets, constant), targets, ks=(1, 5), seen_filter="none", ties="optimistic"
    )
    assert opt.metrics["HR@1"] == 1.0


def test_target_in_history_is_filtered_and_counts_as_miss():
    seqs = Sequences.from_lists([[2, 5, 2]], n_items=5, users=np.arange(1))
    targets = Targets(seqs, np.array([0]), np.array([2]), np.array([2]))
    scores = np.array([[0, 1, 9, 2, 3, 4]], np.float32)  # the target has the best score
    model = _fitted(seqs, targets, scores)
    assert evaluate(model, targets, ks=(1,), seen_filter="none").ranks.tolist() == [0]
    assert evaluate(model, targets, ks=(1,), seen_filter="history").ranks.tolist() == [5]
    # window=1 only filters item 5 (the last history item), not the target 2
    res = evaluate(model, targets, ks=(1,), seen_filter="window", window=1)
    assert res.ranks.tolist() == [0] and res.window == 1


def test_window_filter_keeps_last_items():
    seqs = Sequences.from_lists([[1, 2, 3, 4], [5]], n_items=6)
    scores = np.zeros((2, 7), np.float32)
    apply_seen_filter(scores, seqs, "window", 2)
    assert np.isneginf(scores[0]).nonzero()[0].tolist() == [3, 4]
    assert np.isneginf(scores[1]).nonzero()[0].tolist() == [5]


def test_target_ranks_and_topk_units():
    s = np.array([[-np.inf, 1, 3, 3, 0], [-np.inf, 2, -np.inf, -np.inf, -np.inf]], np.float32)
    assert target_ranks(s, np.array([2, 1])).tolist() == [1, 0]
    assert target_ranks(s, np.array([2, 1]), "optimistic").tolist() == [0, 0]
    assert target_ranks(s, np.array([3, 4])).tolist() == [1, 4]  # -inf target = n_items
    assert topk_items(s, 3).tolist() == [[2, 3, 1], [1, 0, 0]]


def test_nan_scores_are_never_recommended(caplog):
    seqs = Sequences.from_lists([[1, 2]], n_items=3, users=np.arange(1))
    targets = Targets(seqs, np.array([0]), np.array([1]), np.array([2]))
    scores = np.array([[0, 1, np.nan, 0]], np.float32)
    res = evaluate(_fitted(seqs, targets, scores), targets, ks=(1,), seen_filter="none")
    assert res.ranks.tolist() == [3]
    assert "NaN" in caplog.text


def _small():
    seqs = Sequences.from_lists([[1, 2, 3]], n_items=3, users=np.arange(1))
    targets = Targets(seqs, np.array([0]), np.array([2]), np.array([3]))
    return _fitted(seqs, targets, np.ones((1, 4), np.float32)), targets


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"seen_filter": "seen"}, "allowed: history, window, none"),
        ({"seen_filter": "window"}, "needs window"),
        ({"seen_filter": "window", "window": 0}, "window must be"),
        ({"ks": (0, 5)}, "ks must be"),
        ({"ks": ()}, "ks must be"),
        ({"average": "item"}, "allowed: user, interaction"),
        ({"ties": "random"}, "allowed: pessimistic, optimistic"),
        ({"chunk_size": 0}, "chunk_size"),
    ],
)
def test_bad_arguments_raise_config_error(kwargs, message):
    model, targets = _small()
    with pytest.raises(ConfigError, match=message):
        evaluate(model, targets, **kwargs)


def test_bad_scores_shape_raises_data_error():
    model, targets = _small()
    model.score = lambda h, query_times=None: np.ones((1, 7), np.float32)  # wrong size
    with pytest.raises(DataError, match="shape"):
        evaluate(model, targets)


def test_model_cache_is_not_modified_and_progress_bar_runs():
    seqs = Sequences.from_lists([[1, 2, 3], [2, 3, 1]], n_items=3, users=np.arange(2))
    targets = Targets(seqs, np.arange(2), np.array([2, 2]), np.array([3, 1]))
    cache = np.arange(8, dtype=np.float32).reshape(2, 4)
    model = _fitted(seqs, targets, cache)
    model.score = lambda h, query_times=None: cache[: len(h)]  # a view into the cache
    res = evaluate(model, targets.subset(np.array([0])), ks=(1,), progress=True)
    assert np.array_equal(cache, np.arange(8, dtype=np.float32).reshape(2, 4))
    assert res.ranks.tolist() == [0]  # items 1, 2 filtered in the copy; 3 scores highest
    d = res.to_dict()
    assert d["ranking"] == "full" and d["n_targets"] == 1 and "ranks" not in d


def test_topk_torch_and_numpy_paths_agree(monkeypatch):
    import sys

    import torch  # noqa: F401  (loaded: the fast path is taken)

    rng = np.random.default_rng(0)
    scores = rng.permutation(40 * 300).reshape(40, 300).astype(np.float32)  # no ties
    scores[:, 0] = -np.inf
    scores[3, 5:] = -np.inf  # fewer finite scores than k: zeros at the end
    fast = topk_items(scores.copy(), 10)
    monkeypatch.setitem(sys.modules, "torch", None)
    slow = topk_items(scores.copy(), 10)
    np.testing.assert_array_equal(fast, slow)
    assert sorted(fast[3, :4].tolist()) == [1, 2, 3, 4] and fast[3, 4:].tolist() == [0] * 6
    assert (np.diff(np.take_along_axis(scores[:2], fast[:2], 1), axis=1) < 0).all()
