"""A learned user table for models whose paper has a user factor (MF, FPMC, Caser).

In seqrec a "user" at scoring time is a history (``Recommender.score(histories)``). Histories cut
from the prepared data carry the internal user id of their row (``Sequences.users``, kept by
``Targets.histories()`` and by every split), so leave-last-out and temporal evaluation score a
training user with that user's learned factor. A history without a user id (``recommend`` on raw
item lists, data built without ``users``) or with an id the model never saw in training is an
*unknown user*: its user factor is the zero vector, so the model falls back to the parts that do
not depend on the user (the item bias of MF, the Markov-chain term of FPMC, the convolutions of
Caser). This is documented per model; nothing is folded in at scoring time.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from seqrec.data.sequences import Sequences, Targets
from seqrec.errors import DataError
from seqrec.models.torch_recommender import TorchRecommender

N_USERS_KEY = "__n_users__"


class UserEmbedding(nn.Module):
    """``[B]`` user ids -> ``[B, D]`` factors; ids outside ``0..n_users-1`` (or no ids) give 0.

    Args:
        n_users: table size (ids ``0..n_users-1``); 0 makes every user unknown.
        dim: factor size D.
    """

    grows_with_users = True
    """Its rows are users: catalogue growth appends new users' rows (``TorchRecommender._grow``)."""

    def __init__(self, n_users: int, dim: int) -> None:
        super().__init__()
        self.n_users, self.dim = n_users, dim
        self.weight = nn.Parameter(torch.empty(max(n_users, 1), dim))

    def forward(self, users: torch.Tensor | None, batch_size: int) -> torch.Tensor:
        if users is None or self.n_users == 0:
            return self.weight.new_zeros(batch_size, self.dim)
        known = (users >= 0) & (users < self.n_users)
        rows = self.weight[users.clamp(0, self.n_users - 1)]  # [B, D]
        return rows * known[:, None].to(rows.dtype)


class UserTableRecommender(TorchRecommender):
    """``TorchRecommender`` whose encoder is built as ``Encoder(config, n_items, n_users)``.

    ``n_users`` is ``max(train.users) + 1`` at ``fit`` (the data must carry user ids) and is
    saved with the weights.
    """

    def __init__(self, config: Any = None) -> None:
        super().__init__(config)
        self.n_users = 0

    def fit(
        self, train: Sequences, valid: Targets | None = None, **kwargs: Any
    ) -> UserTableRecommender:
        if train.users is None:
            raise DataError(
                f"{self.name} learns one factor per user and needs user ids: got training "
                "Sequences without users (build them with users=..., as preprocessing does)"
            )
        if len(train.users) and train.users.min() < 0:
            raise DataError(f"user ids must be >= 0, got {int(train.users.min())}")
        self.n_users = int(train.users.max()) + 1 if len(train.users) else 0
        return super().fit(train, valid, **kwargs)

    def build_encoder(self, n_items: int):
        return self.encoder_cls(self.config, n_items, n_users=self.n_users)

    def _grow(self, n_items: int, n_users: int | None) -> None:
        """Items as every torch model; the user table grows to ``n_users`` (new users' rows
        start at the mean of the old ones; users beyond the table score with a zero factor)."""
        if n_users is not None and n_users < self.n_users:
            raise DataError(
                f"{self.name}: cannot shrink the user table from {self.n_users} to {n_users}"
            )
        if n_users is not None:
            self.n_users = n_users
        super()._grow(n_items, n_users)

    def _state(self) -> dict[str, np.ndarray]:
        return {**super()._state(), N_USERS_KEY: np.array(self.n_users, dtype=np.int64)}

    def _load_state(self, state: dict[str, np.ndarray]) -> None:
        state = dict(state)
        self.n_users = int(state.pop(N_USERS_KEY))
        super()._load_state(state)
