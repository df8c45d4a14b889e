"""MF: matrix factorization with user and item factors (Koren, Bell & Volinsky, "Matrix
Factorization Techniques for Recommender Systems", IEEE Computer 2009), the "MF" baseline of the
LRURec paper (Yue et al., WSDM 2024, Table 3).

The score of item ``i`` for user ``u`` is ``p_u^T q_i + b_i`` (the paper's eq. 3 without the
global mean ``mu`` and the user bias ``b_u``, which are the same for every item of a user and so
change no ranking and no softmax). The model ignores the order and the content of the history:
at every position of a user's sequence the hidden state is ``p_u``.

Scoring a history (``Recommender.score``): histories carry the internal user id of their row
(``Sequences.users``), and the model scores them with that user's learned factor ``p_u``. A
history whose user is unknown (no user id, e.g. ``recommend`` on raw item lists, or an id not
seen in training) gets ``p_u = 0``, i.e. the ranking of the learned item biases ``b_i`` (the
model's own popularity prior). There is no folding-in: a factor-per-user model that folds a
history into a user vector is FISM (``seqrec.models.fism``), a separate baseline.

Deviations and choices where the paper is silent:

* Objective: softmax cross-entropy over the whole catalogue for every training transition of
  the user (the LRURec comparison trains every model so) instead of the paper's squared error
  on explicit ratings; ``loss`` can select the shared BCE / sampled-softmax / gBCE losses.
* Regularization: AdamW decoupled weight decay (``weight_decay``) instead of the paper's L2
  penalty inside SGD.
* A user's transitions come from its ``max_len`` window(s) like the sequence models
  (``train_windows="sliding"`` trains every transition once); each transition is one
  observed (user, item) pair, so a user's items are weighted by how often they occur.
* Initialization: ``N(0, init_std)`` factors, zero item bias (the paper does not say).
* ``dropout`` (default 0) on the hidden state before the prediction layer is not in the paper;
  the LRURec comparison grid-searched a dropout rate for every model, so it is offered.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from seqrec.data.batching import SequenceBatch
from seqrec.errors import ConfigError
from seqrec.models.encoder import SequenceEncoder
from seqrec.models.layers import Dropout
from seqrec.models.neural_config import NeuralConfig, check_positive, check_range
from seqrec.models.user_table import UserEmbedding, UserTableRecommender


@dataclass(frozen=True)
class MFConfig(NeuralConfig):
    """MF hyperparameters (training defaults: ``train_defaults``)."""

    dim: int = 64
    """Factor size of users and items."""
    init_std: float = 0.02
    """Standard deviation of the normal initialization of both factor tables."""
    dropout: float = 0.0
    """Dropout on the hidden state before the prediction layer (the paper has none; the LRURec
    comparison grid-searched a dropout rate for every model)."""
    item_bias: bool = True
    """Learn an item bias b_i (Koren et al. eq. 3); False scores p_u^T q_i only."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive(self, "dim", "init_std")
        check_range(self, "dropout", 0.0, 0.99)
        if not isinstance(self.item_bias, bool):
            raise ConfigError(f"item_bias must be true or false, got {self.item_bias!r}")


class MFEncoder(SequenceEncoder):
    """Hidden state ``p_u`` at every real position (0 at PAD and for unknown users)."""

    def __init__(self, config: MFConfig, n_items: int, n_users: int = 0) -> None:
        super().__init__()
        self.config, self.n_items = config, n_items
        self.dropout = Dropout(config.dropout)
        self.user_emb = UserEmbedding(n_users, config.dim)
        self.item_emb = nn.Embedding(n_items + 1, config.dim, padding_idx=0)
        self.item_bias = nn.Parameter(torch.zeros(n_items + 1)) if config.item_bias else None
        nn.init.normal_(self.user_emb.weight, 0.0, config.init_std)
        nn.init.normal_(self.item_emb.weight, 0.0, config.init_std)
        with torch.no_grad():
            self.item_emb.weight[0].zero_()

    def forward(self, batch: SequenceBatch) -> torch.Tensor:  # [B, L, D]
        items = batch.items
        if items.shape[1] > self.config.max_len:
            raise ConfigError(
                f"input length {items.shape[1]} exceeds max_len {self.config.max_len}"
            )
        valid = batch.mask if batch.mask is not None else items.ne(0)
        user = self.user_emb(batch.users, items.shape[0])  # [B, D]
        return self.dropout(user[:, None, :] * valid[..., None].to(user.dtype))

    def encode_last(self, batch: SequenceBatch) -> torch.Tensor:  # [B, D]
        return self.user_emb(batch.users, batch.items.shape[0])

    def output_embeddings(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        return self.item_emb.weight, self.item_bias

    def no_decay_names(self) -> set[str]:
        return super().no_decay_names() | ({"item_bias"} if self.item_bias is not None else set())


class MF(UserTableRecommender):
    """Matrix factorization p_u^T q_i + b_i (Koren et al., IEEE Computer 2009); module docstring:
    deviations and how a history is scored."""

    name = "mf"
    config_cls = MFConfig
    encoder_cls = MFEncoder
