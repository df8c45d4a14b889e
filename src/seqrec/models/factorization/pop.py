"""Most-popular baseline: every history gets the training interaction counts as scores."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from seqrec.data.sequences import Sequences, Targets
from seqrec.errors import ConfigError
from seqrec.models.base import Recommender


@dataclass(frozen=True)
class PopConfig:
    """Most-popular settings."""

    recent: int = 0
    """Count only each user's ``recent`` most recent training items (0 = all of them)."""

    def __post_init__(self) -> None:
        if int(self.recent) != self.recent or self.recent < 0:
            raise ConfigError(f"recent must be an integer >= 0, got {self.recent!r}")


class Pop(Recommender):
    """Most popular items by training interaction count (the "MostPopular" row of Frolov &
    Oseledets 2023, Table 2). Scores do not depend on the history; evaluation's seen-item filter
    removes already consumed items. Ties keep the lower item id first (stable ranking)."""

    name = "pop"
    index_unsupported = "its scores do not depend on the history: exact top-k is one sorted list"

    def __init__(self, config: PopConfig = PopConfig()) -> None:
        super().__init__(config)
        self.counts: np.ndarray | None = None  # [n_items + 1]

    def fit(self, train: Sequences, valid: Targets | None = None) -> Pop:
        self._remember_catalogue(train)
        if self.config.recent:
            lengths = train.lengths
            keep = np.minimum(lengths, self.config.recent)
            cut = train.slice_rows(np.arange(len(train)), lengths - keep, lengths)
            counts = cut.item_counts()
        else:
            counts = train.item_counts()
        self.counts = counts.astype(np.float32)
        return self

    def _score(self, histories: Sequences, query_times: np.ndarray | None) -> np.ndarray:
        return np.broadcast_to(self.counts, (len(histories), len(self.counts))).copy()

    def _grow(self, n_items: int, n_users: int | None) -> None:
        """New items count 0 (they rank after every counted item) until a refit counts them."""
        extra = np.zeros(n_items - self.n_items, np.float32)
        self.counts = np.concatenate([self.counts, extra])

    def _state(self) -> dict[str, np.ndarray]:
        return {"counts": self.counts}

    def _load_state(self, state: dict[str, np.ndarray]) -> None:
        self.counts = state["counts"]
