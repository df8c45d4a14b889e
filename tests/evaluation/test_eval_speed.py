"""Issue 2 must-show: full-ranking evaluation of 6,040 users x 3,416 items in < 2 s, given the
scores (a fake model returns precomputed random scores, so only ranking/filtering is timed, plus
the base class's score copy). Skipped by default; run with

    .venv/bin/python -m pytest -m benchmark tests/evaluation/test_eval_speed.py -s
"""

import time

import numpy as np
import pytest

from seqrec.data.sequences import Sequences, Targets
from seqrec.evaluation import evaluate
from seqrec.models.base import Recommender

U, N_ITEMS = 6040, 3416  # ML-1M after 5-core


class Precomputed(Recommender):
    name = "precomputed"

    def __init__(self, scores: np.ndarray) -> None:
        super().__init__(None)
        self.scores, self.pos = scores, 0

    def fit(self, train, valid=None):
        self._remember_catalogue(train)
        return self

    def _score(self, histories, query_times):
        out = self.scores[self.pos : self.pos + len(histories)]
        self.pos = (self.pos + len(histories)) % len(self.scores)
        return out

    def _state(self):
        return {}

    def _load_state(self, state):
        pass


@pytest.mark.benchmark
@pytest.mark.parametrize("seen_filter", ["history", "window", "none"])
def test_full_ranking_ml1m_size_under_2s(seen_filter):
    rng = np.random.default_rng(0)
    lengths = rng.integers(20, 330, U)  # ~1.05M interactions, like ML-1M
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    seqs = Sequences(
        offsets, rng.integers(1, N_ITEMS + 1, offsets[-1]), N_ITEMS, users=np.arange(U)
    )
    targets = Targets(seqs, np.arange(U), lengths - 1, seqs.items[offsets[1:] - 1])
    scores = rng.standard_normal((U, N_ITEMS + 1)).astype(np.float32)
    model = Precomputed(scores).fit(seqs)
    best = np.inf
    for _ in range(3):
        t0 = time.perf_counter()
        res = evaluate(model, targets, seen_filter=seen_filter, window=200)
        best = min(best, time.perf_counter() - t0)
    print(f"\n{seen_filter}: {res.n_targets} targets x {N_ITEMS} items, best of 3 {best:.3f}s")
    assert res.n_targets == U
    assert best < 2.0
