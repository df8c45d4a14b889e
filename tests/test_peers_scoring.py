"""The peers table scores other libraries' top-k lists with seqrec's evaluator
(``benchmarks/peers/run_peers.py``): a list must give the same metrics as a model whose scores
produce that list."""

import importlib.util
from pathlib import Path

import numpy as np

from seqrec.data.sequences import Sequences, Targets
from seqrec.evaluation import evaluate

ROOT = Path(__file__).resolve().parents[1]


def _load():
    spec = importlib.util.spec_from_file_location("run_peers", ROOT / "benchmarks" / "peers" / "run_peers.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class _Dense:
    def __init__(self, scores, n_items):
        self.scores, self.n_items = scores, n_items

    def score(self, histories, query_times=None):
        return np.stack([self.scores[histories.row(i).tobytes()] for i in range(len(histories))])


def test_topk_lists_score_like_the_model_that_made_them():
    rng = np.random.default_rng(0)
    n_items, n_users = 30, 12
    rows = [list(rng.choice(np.arange(1, n_items + 1), size=int(rng.integers(3, 8)), replace=False))
            for _ in range(n_users)]
    offsets = np.concatenate([[0], np.cumsum([len(r) for r in rows])])
    seqs = Sequences(offsets, np.concatenate(rows), n_items=n_items)
    users = np.arange(n_users)
    targets = Targets(seqs, users, seqs.lengths - 1, np.array([r[-1] for r in rows]))
    hist = targets.histories()
    dense, tops = {}, []
    for i in range(n_users):
        s = rng.normal(size=n_items + 1)
        s[0] = -np.inf
        dense[hist.row(i).tobytes()] = s
        masked = s.copy()
        masked[hist.row(i)] = -np.inf  # the peer filters the history itself
        tops.append(np.argsort(-masked, kind="stable")[:10])
    truth = evaluate(_Dense(dense, n_items), targets, ks=(5, 10), seen_filter="history")
    peers = _load()
    # the lookup is keyed by each user's history: give the input histories, not the full rows
    lists = peers.TopKLists(hist, np.arange(n_users), np.array(tops), n_items)
    got = evaluate(lists, targets, ks=(5, 10), seen_filter="history")
    for m in ("NDCG@5", "NDCG@10", "HR@10"):
        assert abs(got.metrics[m] - truth.metrics[m]) < 1e-12, m
    assert truth.metrics["HR@10"] > 0  # the check is not vacuous
