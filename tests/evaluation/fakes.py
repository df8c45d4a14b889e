"""A fake recommender returning fixed scores, and a plain brute-force ranking reference."""

from __future__ import annotations

import math

import numpy as np

from seqrec.data.sequences import Sequences, Targets
from seqrec.models.base import Recommender


class FixedScores(Recommender):
    """Returns ``scores[t]`` for the history of target ``t``, found by (user, history length).

    Targets must have distinct (row, cutoff) pairs and non-empty histories; sequences must
    carry ``users``. Order-independent, so it works for any chunking.
    """

    name = "fixed-scores"

    def __init__(self, targets: Targets, scores: np.ndarray) -> None:
        super().__init__(None)
        users = targets.sequences.users[targets.rows]
        self.key = {
            (int(u), int(c)): t for t, (u, c) in enumerate(zip(users, targets.cutoffs, strict=True))
        }
        assert len(self.key) == len(targets)
        self.scores = np.asarray(scores, dtype=np.float32)
        self.calls: list[int] = []

    def fit(self, train: Sequences, valid: Targets | None = None) -> FixedScores:
        self._remember_catalogue(train)
        return self

    def _score(self, histories: Sequences, query_times: np.ndarray | None) -> np.ndarray:
        self.calls.append(len(histories))
        idx = [
            self.key[(int(u), int(n))]
            for u, n in zip(histories.users, histories.lengths, strict=True)
        ]
        return self.scores[idx].copy()

    def _state(self) -> dict[str, np.ndarray]:
        return {"scores": self.scores}

    def _load_state(self, state: dict[str, np.ndarray]) -> None:
        self.scores = state["scores"]


def brute_force_rank(
    score_row: np.ndarray,
    history: list[int],
    target: int,
    seen_filter: str,
    window: int | None,
    ties: str,
) -> int:
    """Rank of ``target`` by sorting the filtered scores (argsort), ties placed by policy."""
    s = np.array(score_row, dtype=np.float64)
    s[0] = -np.inf
    if seen_filter == "history":
        for item in history:
            s[item] = -np.inf
    elif seen_filter == "window":
        for item in history[len(history) - window :] if window < len(history) else history:
            s[item] = -np.inf
    n_items = len(s) - 1
    if s[target] == -np.inf:
        return n_items
    is_target = np.zeros(len(s), int)
    is_target[target] = 1
    # lexsort: last key is primary. Pessimistic puts the target after its equals.
    secondary = is_target if ties == "pessimistic" else 1 - is_target
    order = list(np.lexsort((secondary, -s)))
    return order.index(target)


def plain_metrics(ranks: list[int], ks: tuple[int, ...]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for k in ks:
        out[f"HR@{k}"] = [1.0 if r < k else 0.0 for r in ranks]
        out[f"NDCG@{k}"] = [1.0 / math.log2(r + 2) if r < k else 0.0 for r in ranks]
    out["MRR"] = [1.0 / (r + 1) for r in ranks]
    return out
