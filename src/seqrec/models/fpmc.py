"""FPMC: Factorizing Personalized Markov Chains (Rendle, Freudenthaler & Schmidt-Thieme,
WWW 2010), a baseline of the LRURec (Yue et al., WSDM 2024) and LSAN (Li et al., CIKM 2021)
papers.

The paper's FPMC scores item ``i`` for user ``u`` after basket ``B_{t-1}`` as (eq. 7)::

    x_uti = <v_u^{U,I}, v_i^{I,U}> + 1/|B_{t-1}| sum_{l in B_{t-1}} <v_i^{I,L}, v_l^{L,I}>

i.e. matrix factorization (MF) plus a factorized first-order Markov chain (FMC) shared by all
users. In next-item recommendation every basket is the single previous item ``x_t``, so the
transition term is ``<v_i^{I,L}, v_{x_t}^{L,I}>``. As one inner product: the hidden state at
position ``t`` is ``[v_u^{U,I}; v_{x_t}^{L,I}]`` and the prediction layer is
``[v_i^{I,U}; v_i^{I,L}]`` (both ``2 * dim`` wide).

Scoring a history: the user factor is the learned ``v_u^{U,I}`` of the history's user id
(``Sequences.users``); an unknown user (no id, or one not seen in training) gets 0, which leaves
the FMC term alone (the paper's FMC model). Only the last item of the history enters the score.

Deviations and choices where the paper is silent:

* Objective: softmax cross-entropy over the catalogue at every position (the LRURec comparison
  trains every model so) instead of S-BPR with sampled negatives; ``loss="bce"`` gives the
  closest shared loss (one sampled negative per position, pointwise rather than pairwise).
* Baskets are single items (sequential recommendation); the paper's averaging over a basket
  is then the identity.
* One factor size ``dim`` for the MF and FMC parts (the paper allows k_UI != k_IL and uses equal
  sizes in its experiments). No bias terms (the paper has none).
* Regularization: AdamW decoupled weight decay instead of L2 inside LearnBPR. Initialization:
  ``N(0, init_std)`` (the paper draws from N(0, sigma^2) with a small sigma).
* ``dropout`` (default 0) on the hidden state before the prediction layer is not in the paper;
  the LRURec comparison grid-searched a dropout rate for every model, so it is offered.
* Training defaults (``SlidingRecipeConfig``): every transition once per epoch
  (``train_windows="sliding"``), lr 3e-3, patience 30, ahead on MovieLens data and level on
  Beauty against the paper-style ``train_windows="last", lr=1e-3, patience=10`` (the LSAN and
  LRURec tables pin their own); evidence: ``docs/decisions/sliding-training-windows.md`` and
  ``docs/decisions/learning-rate-and-patience.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from seqrec.data.batching import SequenceBatch
from seqrec.errors import ConfigError
from seqrec.models.encoder import SequenceEncoder
from seqrec.models.layers import Dropout
from seqrec.models.neural_config import SLIDING_RECIPE, NeuralConfig, check_positive, check_range
from seqrec.models.user_table import UserEmbedding, UserTableRecommender


@dataclass(frozen=True)
class FPMCConfig(NeuralConfig):
    """FPMC hyperparameters (training defaults from the
    sliding-window recipe)."""

    train_defaults = SLIDING_RECIPE

    dim: int = 64
    """Factor size k of each of the four factor tables (hidden state is 2 * dim wide)."""
    init_std: float = 0.02
    """Standard deviation of the normal initialization of every factor table."""
    dropout: float = 0.0
    """Dropout on the hidden state before the prediction layer (the paper has none; the LRURec
    comparison grid-searched a dropout rate for every model)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive(self, "dim", "init_std")
        check_range(self, "dropout", 0.0, 0.99)


class FPMCEncoder(SequenceEncoder):
    """Position ``t``: ``[v_u^{U,I}; v_{x_t}^{L,I}]`` (0 at PAD positions)."""

    def __init__(self, config: FPMCConfig, n_items: int, n_users: int = 0) -> None:
        super().__init__()
        self.config, self.n_items = config, n_items
        self.dropout = Dropout(config.dropout)
        d = config.dim
        self.user_emb = UserEmbedding(n_users, d)  # V^{U,I}
        self.item_user_emb = nn.Embedding(n_items + 1, d, padding_idx=0)  # V^{I,U}
        self.item_last_emb = nn.Embedding(n_items + 1, d, padding_idx=0)  # V^{I,L} (next item)
        self.last_item_emb = nn.Embedding(n_items + 1, d, padding_idx=0)  # V^{L,I} (previous)
        for w in (
            self.user_emb.weight,
            self.item_user_emb.weight,
            self.item_last_emb.weight,
            self.last_item_emb.weight,
        ):
            nn.init.normal_(w, 0.0, config.init_std)
        with torch.no_grad():
            for emb in (self.item_user_emb, self.item_last_emb, self.last_item_emb):
                emb.weight[0].zero_()

    def forward(self, batch: SequenceBatch) -> torch.Tensor:  # [B, L, 2D]
        items = batch.items
        if items.shape[1] > self.config.max_len:
            raise ConfigError(
                f"input length {items.shape[1]} exceeds max_len {self.config.max_len}"
            )
        valid = (batch.mask if batch.mask is not None else items.ne(0)).to(torch.float32)
        user = self.user_emb(batch.users, items.shape[0])  # [B, D]
        user = user[:, None, :].expand(-1, items.shape[1], -1)
        hidden = torch.cat([user, self.last_item_emb(items)], dim=-1)
        return self.dropout(hidden * valid[..., None])

    def output_embeddings(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        return torch.cat([self.item_user_emb.weight, self.item_last_emb.weight], dim=-1), None


class FPMC(UserTableRecommender):
    """FPMC: MF plus a factorized first-order Markov chain (Rendle et al., WWW 2010); module
    docstring: deviations and how a history is scored."""

    name = "fpmc"
    config_cls = FPMCConfig
    encoder_cls = FPMCEncoder
