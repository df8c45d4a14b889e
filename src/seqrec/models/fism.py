"""FISM: Factored Item Similarity Models (Kabbur, Ning & Karypis, KDD 2013), the "FISM"
baseline of the LRURec paper (Yue et al., WSDM 2024, Table 3).

There is no user factor: a user is the normalized sum of the "history" factors ``p_j`` of the
items they consumed, and the score of item ``i`` is (paper eq. 3, FISMrmse / FISMauc)::

    r_ui = b_i + (n_u)^(-alpha) * sum_{j in history} p_j^T q_i

with two item factor tables P (history side) and Q (target side) and ``alpha`` in [0, 1]
controlling how much the number of consumed items dampens the sum (0: plain sum, 1: mean).
Applied to a sequence, the hidden state at position ``t`` is ``t^(-alpha) * sum_{j <= t} p_{x_j}``
over the real items up to ``t`` (a causal prefix sum), so a held-out history is scored by
folding it in exactly as at training time: no user table is involved.

Deviations and choices where the paper is silent:

* Objective: softmax cross-entropy over the catalogue for the next item at every position (the
  LRURec comparison trains every model so) instead of FISMrmse's squared error with sampled
  zeros or FISMauc's pairwise ranking loss; ``loss`` can select BCE / sampled softmax / gBCE.
* The paper excludes the target item from its own sum (``j != i``) and normalizes by
  ``(n_u - 1)``; here the target is the next item, which is not in the prefix unless it is a
  repeat, so the sum is over the whole prefix and normalized by its length. On data without
  repeated items (the 5-core MovieLens and Amazon sets) the two coincide.
* The user bias ``b_u`` is dropped: it is the same for every item of a user and changes no
  ranking and no softmax. The item bias ``b_i`` is kept.
* The history is the model's window: the most recent ``max_len`` items (the paper uses the whole
  profile; set ``max_len`` at least the longest history for that).
* Regularization: AdamW decoupled weight decay instead of the paper's L2 (``beta``, ``lambda``).
  Initialization: ``N(0, init_std)`` factors, zero bias.
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
from seqrec.models.torch_recommender import TorchRecommender


@dataclass(frozen=True)
class FISMConfig(NeuralConfig):
    """FISM hyperparameters (training defaults: ``train_defaults``)."""

    dim: int = 64
    """Factor size k of both item tables P and Q."""
    alpha: float = 0.5
    """Normalization exponent: the history sum is divided by (number of items)^alpha."""
    init_std: float = 0.02
    """Standard deviation of the normal initialization of P and Q."""
    dropout: float = 0.0
    """Dropout on the hidden state before the prediction layer (the paper has none; the LRURec
    comparison grid-searched a dropout rate for every model)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive(self, "dim", "init_std")
        check_range(self, "alpha", 0.0, 1.0)
        check_range(self, "dropout", 0.0, 0.99)


class FISMEncoder(SequenceEncoder):
    """Position ``t``: ``n_t^(-alpha) * sum_{j <= t} P[x_j]`` (0 at PAD positions)."""

    def __init__(self, config: FISMConfig, n_items: int) -> None:
        super().__init__()
        self.config, self.n_items = config, n_items
        self.dropout = Dropout(config.dropout)
        self.history_emb = nn.Embedding(n_items + 1, config.dim, padding_idx=0)  # P
        self.target_emb = nn.Embedding(n_items + 1, config.dim, padding_idx=0)  # Q
        self.item_bias = nn.Parameter(torch.zeros(n_items + 1))
        for emb in (self.history_emb, self.target_emb):
            nn.init.normal_(emb.weight, 0.0, config.init_std)
            with torch.no_grad():
                emb.weight[0].zero_()

    def forward(self, batch: SequenceBatch) -> torch.Tensor:  # [B, L, D]
        items = batch.items
        if items.shape[1] > self.config.max_len:
            raise ConfigError(
                f"input length {items.shape[1]} exceeds max_len {self.config.max_len}"
            )
        valid = (batch.mask if batch.mask is not None else items.ne(0)).to(torch.float32)
        p = self.history_emb(items) * valid[..., None]  # PAD rows are zero already
        total = p.cumsum(dim=1)
        count = valid.cumsum(dim=1).clamp(min=1.0)
        return self.dropout(total * count.pow(-self.config.alpha)[..., None] * valid[..., None])

    def encode_last(self, batch: SequenceBatch) -> torch.Tensor:  # [B, D]
        valid = (batch.mask if batch.mask is not None else batch.items.ne(0)).to(torch.float32)
        total = (self.history_emb(batch.items) * valid[..., None]).sum(dim=1)
        scale = valid.sum(1).clamp(min=1.0).pow(-self.config.alpha) * valid[:, -1]
        return total * scale[:, None]

    def output_embeddings(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        return self.target_emb.weight, self.item_bias

    def no_decay_names(self) -> set[str]:
        return super().no_decay_names() | {"item_bias"}


class FISM(TorchRecommender):
    """FISM item-to-item similarity, no user factor (Kabbur et al., KDD 2013); see the module
    docstring for the deviations."""

    name = "fism"
    config_cls = FISMConfig
    encoder_cls = FISMEncoder
