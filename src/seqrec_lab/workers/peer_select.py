"""Epoch selection on seqrec's filtered validation, for the peer workers (imported by the
``peer_<library>.py`` workers, which run with their peer's interpreter: NumPy only).

With ``selection = "filtered"`` a peer keeps the epoch whose validation lists score the best
NDCG@10 under seqrec's protocol (the lists already have the user's whole history removed; the
target is the validation item), and stops after ``patience`` epochs without improvement or at
the epoch cap: the rule seqrec's own trainer applies. ``selection = "library"`` keeps each
library's own rule (RecTools: the last epoch; RecBole: its own unfiltered validation).
"""

from __future__ import annotations

import numpy as np


def ndcg_at(lists: np.ndarray, targets: np.ndarray, k: int = 10) -> float:
    """Mean NDCG@k of top lists ``[U, >=k]`` (0 = no item) against one target per user: the
    leave-one-out form seqrec's evaluator computes (1 / log2(rank + 2) on a hit, else 0)."""
    top = np.asarray(lists)[:, :k]
    hit = top == np.asarray(targets)[:, None]
    ranks = np.argmax(hit, axis=1)
    gains = np.where(hit.any(axis=1), 1.0 / np.log2(ranks + 2.0), 0.0)
    return float(gains.mean()) if len(gains) else 0.0


class BestEpoch:
    """The best epoch so far and whether patience has run out (state: a plain dict, so that a
    worker can save and restore it with its clock)."""

    def __init__(self, patience: int, state: dict | None = None) -> None:
        self.patience = patience
        self.state = dict(state or {"best_epoch": None, "best_score": None})

    def update(self, epoch: int, score: float) -> bool:
        """Record ``epoch``'s score; True when it is the new best (strictly higher)."""
        best = self.state["best_score"]
        if best is None or score > best:
            self.state.update(best_epoch=epoch, best_score=float(score))
            return True
        return False

    def exhausted(self, epoch: int) -> bool:
        """True when ``patience`` epochs have passed since the best one."""
        best = self.state["best_epoch"]
        return best is not None and epoch - best >= self.patience
