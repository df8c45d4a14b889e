"""BERT4Rec: bidirectional Transformer trained with the Cloze objective.

Sun, Liu, Wu, Pei, Lin, Ou, Jiang, "BERT4Rec: Sequential Recommendation with Bidirectional
Encoder Representations from Transformer", CIKM 2019; official TensorFlow code FeiSun/BERT4Rec
(``gen_data_fin.py``, ``run.py``, ``modeling.py``, ``run_ml-1m.sh``, ``run_beauty.sh``).

Model (paper Sec. 3, checked against the official code):

* **Embedding**: ``x = Dropout(LayerNorm(E[item] + P[position]))`` with ``E`` ``[I + 2, D]``
  (row 0 = PAD, row ``I + 1`` = the ``[mask]`` token) and a learnable position table ``P``.
* **Blocks** (post-LN, as BERT): ``a = LN(x + Dropout(MH(x)))``,
  ``x = LN(a + Dropout(W2 GELU(W1 a + b1) + b2))`` with ``W1`` ``[4D, D]``; multi-head
  attention with Q/K/V and output projections; every real position attends to every real
  position of the window (bidirectional), never to PAD.
* **Output** (eq. 7): ``P(v) = softmax(GELU(h W^P + b^P) E^T + b^O)`` with the input
  embedding ``E`` shared (the mask row excluded) and an output bias ``b^O``.
* **Cloze training** (Sec. 3.6): a proportion ``rho`` (``mask_prob``) of each training sequence
  is masked and predicted with cross-entropy over all items at the masked positions. As in
  ``gen_data_fin.py`` (``cloze="official"``): exactly ``max(1, round(n rho))`` positions are
  drawn per sequence and all become ``[mask]`` (``mask_prob=1.0`` there: no 80/10/10), and a
  share of the samples mask only the last item ("we also produce samples that only mask the
  last item ... like fine-tuning", Sec. 3.6).
* **Inference**: the ``[mask]`` token is appended after the history (the oldest item drops out
  when the history fills the window) and its output scores the catalogue.

Deviations and choices (all documented, the switchable ones as config fields):

* The official generator writes each training window ``dupe_factor = 10`` times with fresh masks
  plus once with only the last item masked, then trains 400k steps on that fixed file. Here the
  masks are redrawn every step from the step's generator (fresh masks each epoch, so exact
  resume and seeded determinism hold), and a sequence becomes a last-item sample with
  probability ``mask_last_prob`` (default 1/11, the official 10 : 1 ratio).
* ``cloze="lrurec"`` reproduces the masking of the LRURec authors' PyTorch BERT4Rec (the code
  base of the LRURec comparison, ``Yueeeeeeee/RecSys-Extraction-Attack`` ``dataloader/bert.py``):
  every position is masked independently with probability ``rho`` (the last one with
  ``rho + 0.1 (1 - rho)``), a masked position becomes ``[mask]`` / a random item / itself with
  probability 0.8 / 0.1 / 0.1. Their cap on predictions per sequence and their rule of never
  masking the same item twice are not reproduced; a sequence that drew no mask has its last
  item masked (theirs contributes nothing to the loss).
* ``max_predictions_per_seq`` (40 on ML-1M, 30 on Beauty) is not applied: at the official
  ``rho * max_len`` (0.2 * 200, 0.6 * 50) it never binds.
* Positions are numbered from the oldest item of the window (``positions="from_start"``), as
  the official code (right-padded, absolute positions) and the LRURec authors' code; inputs are
  left-padded here, so the numbering is independent of padding. ``"from_end"`` gives the most
  recent position (the mask at inference) always the same embedding.
* ``init="official"`` (default) draws every weight, the item and position tables included, from
  the official truncated normal (std 0.02, cut at 2 std). ``init="lrurec"`` follows the LRURec
  authors' code (``model/bert.py``): their truncated-normal initialiser covers only the
  Transformer blocks and the output transform, so the item and position tables keep PyTorch's
  default ``N(0, 1)`` (the PAD row zero); the output bias stays zero (theirs draws it from the
  truncated normal too: a constant shift of 0.02 at most, immaterial). It is the slower of the
  two to learn (``docs/decisions/bert4rec-init-and-output.md``).
* ``output="tied"`` drops the output transform and bias (scores ``h E^T``, the Dross et al.
  HF-BERT BERT4Rec, antklen/sasrec-bert4rec-recsys23); the default is the paper's eq. 7. On
  ML-1M it helps under the Dross recipe and is only level with the transform under the LRURec
  recipe. It is not the default: the gain depends on the recipe, and a default is chosen on
  validation across datasets (``docs/decisions/bert4rec-init-and-output.md``).
* ``head_norm`` (off) adds the LayerNorm that the official code's output transform has after
  the GELU; the paper's eq. 7 and the LRURec authors' code have none.
* Optimiser: AdamW with decoupled weight decay 0.01 on everything but biases and LayerNorms and
  gradient clipping at norm 5 (the official optimisation), lr 1e-4, betas (0.9, 0.999),
  batch 256 as the paper; the official linear warm-up (100 steps) and linear decay to zero over
  400k steps are not implemented (constant rate), and its Adam epsilon 1e-6 is PyTorch's 1e-8.
  Early stopping and model selection are the shared trainer's (validation NDCG@10).
* The official code trains on the validation item too (train + valid, evaluated on test only);
  here validation items are held out for model selection, as in the other models.
* Token-type embeddings of the official BERT code (one constant type) are omitted: a constant
  added before LayerNorm.
* The input window at inference holds ``max_len - 1`` history items and the mask; the
  evaluation's ``window`` seen filter removes the last ``max_len`` history items (one more).
* The whole catalogue is ranked (full ranking), not 100 popularity-sampled negatives as in
  the paper's evaluation.
* ``loss`` other than ``"ce"`` (bce, sampled softmax, gBCE) applies that loss at the masked
  positions; negatives are drawn per window position as for the causal models.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from seqrec.config_fields import setting
from seqrec.data.batching import SequenceBatch, left_pad
from seqrec.data.sequences import Sequences
from seqrec.errors import ConfigError
from seqrec.models.encoder import SequenceEncoder
from seqrec.models.layers import Dropout
from seqrec.models.neural_config import (
    NeuralConfig,
    RunConfig,
    TrainConfig,
    check_choice,
    check_positive,
    check_range,
)
from seqrec.models.sasrec import CausalSelfAttention
from seqrec.models.torch_recommender import TorchRecommender, append_mean_rows

INIT_STD = 0.02
CLOZE = ("official", "lrurec")


@dataclass(frozen=True)
class BERT4RecConfig(NeuralConfig):
    """BERT4Rec hyperparameters (its training defaults: ``train_defaults``).

    Defaults follow the paper (d = 64, 2 blocks, 2 heads, dropout 0.1, rho = 0.2 as on ML-1M,
    Adam lr 1e-4 with weight decay 0.01, batch 256). The paper's rho: 0.2 on ML-1M / ML-20M,
    0.4 on Steam, 0.6 on Beauty.
    """

    dim: int = 64
    """Embedding / hidden size d."""
    n_blocks: int = 2
    """Number of Transformer blocks."""
    n_heads: int = 2
    """Attention heads (d must be divisible by it)."""
    dropout: float = 0.1
    """Dropout after the embedding LayerNorm and on both residual branches."""
    attn_dropout: float = 0.1
    """Dropout on the attention weights."""
    ffn_dim: int = 0
    """FFN inner size (0 = 4 d, as the paper)."""
    mask_prob: float = 0.2
    """Cloze proportion rho of masked items per training sequence."""
    cloze: str = "official"
    """'official' (exact count, always [mask], last-item samples) or 'lrurec' (Bernoulli per
    position, 80/10/10 replacement: the LRURec authors' code)."""
    mask_last_prob: float = 1 / 11
    """'official' only: share of training sequences that mask only their last item."""
    positions: str = "from_start"
    """'from_start' (numbered from the oldest item of the window, as the official and LRURec
    code) or 'from_end' (the most recent position always has the same embedding)."""
    init: str = "official"
    """'official' (truncated normal 0.02 everywhere) or 'lrurec' (item and position tables from
    N(0, 1), as the LRURec authors' code leaves them)."""
    head_norm: bool = False
    """LayerNorm after the output GELU transform (the official code; not in the paper)."""
    output: str = setting("transform", legacy="transform")
    """'transform' (eq. 7: ``GELU(h W^P + b^P) E^T + b^O``, the official and LRURec code) or
    'tied' (``h E^T``: no transform, no output bias, as the Dross authors' HF-BERT BERT4Rec)."""
    train_defaults = {  # the paper's optimisation, and the official code's clipping
        "lr": 1e-4,
        "weight_decay": 0.01,
        "decay_biases_and_norms": False,  # the official optimiser excludes biases and LayerNorms
        "betas": (0.9, 0.999),
        "batch_size": 256,
        "grad_clip": 5.0,
    }

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive(self, "dim", "n_blocks", "n_heads")
        check_range(self, "dropout", 0.0, 0.99)
        check_range(self, "attn_dropout", 0.0, 0.99)
        check_range(self, "mask_last_prob", 0.0, 1.0)
        check_choice(self, "output", ("transform", "tied"))
        if self.output == "tied" and self.head_norm:
            raise ConfigError("head_norm needs output = 'transform' (it normalises the transform)")
        check_choice(self, "cloze", CLOZE)
        check_choice(self, "positions", ("from_start", "from_end"))
        check_choice(self, "init", ("official", "lrurec"))
        if not 0.0 < self.mask_prob <= 1.0:
            raise ConfigError(f"mask_prob must be in (0, 1], got {self.mask_prob!r}")
        if self.max_len < 2:
            raise ConfigError(
                f"max_len must be >= 2 (a history item and the mask), got {self.max_len}"
            )
        if self.dim % self.n_heads:
            raise ConfigError(
                f"dim must be divisible by n_heads, got dim={self.dim}, n_heads={self.n_heads}"
            )
        if self.ffn_dim < 0:
            raise ConfigError(f"ffn_dim must be >= 0, got {self.ffn_dim}")

    def check_training(self, train: TrainConfig, run: RunConfig) -> None:
        super().check_training(train, run)
        if train.window_stride or not train.batch_size:
            raise ConfigError(
                "window_stride and batch_size = 0 (batch_targets) are not supported by "
                "bert4rec: its Cloze targets are masked items, not next items"
            )


def cloze_mask(
    items: np.ndarray, rng: np.random.Generator, cfg: BERT4RecConfig, n_items: int
) -> tuple[np.ndarray, np.ndarray]:
    """Masked inputs and labels ``[B, L]`` (label 0 = not predicted) of left-padded ``items``.

    The mask token is ``n_items + 1``; every row with a real item gets at least one label.
    """
    real = items != 0
    b, length = items.shape
    mask_token = n_items + 1
    inputs = items.copy()
    if cfg.cloze == "official":
        n = real.sum(1)
        # Python 2 round (half away from zero), as gen_data_fin.py ran under Python 2
        k = np.maximum(1, np.floor(n * cfg.mask_prob + 0.5)).astype(np.int64)
        keys = np.where(real, rng.random((b, length)), 2.0)  # PAD never drawn
        rank = keys.argsort(1, kind="stable").argsort(1, kind="stable")
        chosen = rank < k[:, None]
        last_only = rng.random(b) < cfg.mask_last_prob
        chosen[last_only] = False
        chosen[last_only, -1] = True  # left-padded: the last column is the most recent item
        chosen &= real
        inputs[chosen] = mask_token
    else:
        u = rng.random((b, length))
        p = np.full(length, cfg.mask_prob)
        p[-1] = cfg.mask_prob + 0.1 * (1.0 - cfg.mask_prob)
        chosen = (u < p) & real
        none = ~chosen.any(1) & real[:, -1]
        chosen[none, -1] = True
        v = np.where(chosen, u / p, 1.0)  # where inside the mask interval each draw fell
        inputs[chosen & (v < 0.8)] = mask_token
        swap = chosen & (v >= 0.8) & (v < 0.9)
        inputs[swap] = rng.integers(1, n_items + 1, size=int(swap.sum()))
    labels = np.where(chosen, items, 0)
    return inputs, labels


class _Block(nn.Module):
    """Post-LN Transformer block with bidirectional (padding-masked) attention."""

    def __init__(self, cfg: BERT4RecConfig) -> None:
        super().__init__()
        d = cfg.dim
        self.attn = CausalSelfAttention(d, cfg.n_heads, cfg.attn_dropout, out_proj=True)
        self.attn_norm = nn.LayerNorm(d, eps=1e-12)
        self.fc1 = nn.Linear(d, cfg.ffn_dim or 4 * d)
        self.fc2 = nn.Linear(cfg.ffn_dim or 4 * d, d)
        self.act = nn.GELU(approximate="tanh")  # BERT's GELU
        self.ffn_norm = nn.LayerNorm(d, eps=1e-12)
        self.dropout = Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        x = self.attn_norm(x + self.dropout(self.attn(x, x, allowed)))
        return self.ffn_norm(x + self.dropout(self.fc2(self.act(self.fc1(x)))))


class BERT4RecEncoder(SequenceEncoder):
    """``[B, L]`` left-padded items (``n_items + 1`` = mask) -> ``[B, L, D]`` output
    transforms ``GELU(h W^P + b^P)``, or the last block's ``h`` with ``output="tied"`` (PAD
    positions are 0); bidirectional."""

    def __init__(self, config: BERT4RecConfig, n_items: int) -> None:
        super().__init__()
        self.config, self.n_items = config, n_items
        self.mask_token = n_items + 1
        d = config.dim
        self.item_emb = nn.Embedding(n_items + 2, d, padding_idx=0)
        self.pos_emb = nn.Embedding(config.max_len, d)
        self.emb_norm = nn.LayerNorm(d, eps=1e-12)
        self.emb_dropout = Dropout(config.dropout)
        self.blocks = nn.ModuleList(_Block(config) for _ in range(config.n_blocks))
        transform = config.output == "transform"
        self.head = nn.Linear(d, d) if transform else None
        self.head_act = nn.GELU(approximate="tanh") if transform else None
        self.head_norm = nn.LayerNorm(d, eps=1e-12) if config.head_norm else None
        self.out_bias = nn.Parameter(torch.zeros(n_items + 1)) if transform else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # the official initializer: truncated normal (std 0.02, cut at 2 std), zero biases
        for name, p in self.named_parameters():
            if "norm" in name:
                continue
            if p.dim() >= 2:
                nn.init.trunc_normal_(p, 0.0, INIT_STD, -2 * INIT_STD, 2 * INIT_STD)
            else:
                nn.init.zeros_(p)
        if self.config.init == "lrurec":
            nn.init.normal_(self.item_emb.weight)
            nn.init.normal_(self.pos_emb.weight)
        with torch.no_grad():
            self.item_emb.weight[0].zero_()

    def no_decay_names(self) -> set[str]:
        return super().no_decay_names() | {"out_bias"}

    def forward(self, batch: SequenceBatch) -> torch.Tensor:
        items = batch.items
        length = items.shape[1]
        if length > self.config.max_len:
            raise ConfigError(f"input length {length} exceeds max_len {self.config.max_len}")
        valid = batch.mask if batch.mask is not None else items.ne(0)
        if self.config.positions == "from_start":
            pos = self.pos_emb((valid.cumsum(1) - 1).clamp_(min=0))  # [B, L, D]
        else:
            pos = self.pos_emb(
                torch.arange(self.config.max_len - length, self.config.max_len, device=items.device)
            )[None]
        x = self.emb_dropout(self.emb_norm(self.item_emb(items) + pos)) * valid[..., None]
        # every query sees every real key; a PAD query sees itself (no all-masked softmax row)
        eye = torch.eye(length, dtype=torch.bool, device=items.device)
        allowed = valid[:, None, :] | eye[None]  # [B, L, L]
        for block in self.blocks:
            x = block(x, allowed)
        if self.head is not None:
            x = self.head_act(self.head(x))
        if self.head_norm is not None:
            x = self.head_norm(x)
        return x * valid[..., None]

    def output_embeddings(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        return self.item_emb.weight[: self.n_items + 1], self.out_bias  # the mask row excluded


class BERT4Rec(TorchRecommender):
    """BERT4Rec recommender (see the module docstring for the paper and deviations)."""

    name = "bert4rec"
    config_cls = BERT4RecConfig
    encoder_cls = BERT4RecEncoder
    causal = False

    def make_batch(self, train: Sequences, rows: np.ndarray, rng: np.random.Generator) -> dict:
        """Cloze inputs of each row's most recent ``max_len`` items; targets = masked items."""
        items, _ = left_pad(train, rows, self.config.max_len)
        inputs, labels = cloze_mask(items, rng, self.config, train.n_items)
        users = None if train.users is None else torch.from_numpy(train.users[rows])
        batch = SequenceBatch(
            items=torch.from_numpy(inputs),
            mask=torch.from_numpy(items != 0),
            targets=torch.from_numpy(labels),
            users=users,
        )
        return {"batch": batch, **self.negatives(rows, rng)}

    def _grow_rows(
        self, key: str, old: torch.Tensor, target: torch.Tensor, old_n: int, n_items: int
    ) -> torch.Tensor | None:
        """The input table ends with the mask token's row (id ``n_items + 1``): it moves to the
        new last id, and the new items' rows between start at the mean of the old items'."""
        if key != "item_emb.weight":
            return None
        items = append_mean_rows(old[: old_n + 1], n_items - old_n, first=1)
        return torch.cat([items, old[old_n + 1 :]])

    def scoring_batch(
        self, histories: Sequences, width: int, query_times: np.ndarray | None
    ) -> SequenceBatch:
        """The history's most recent ``max_len - 1`` items followed by the mask token."""
        keep = max(1, min(width, self.config.max_len - 1))
        items, _ = left_pad(histories, np.arange(len(histories)), keep)
        items = np.concatenate([items, np.full((len(items), 1), self.n_items + 1, np.int64)], 1)
        users = None if histories.users is None else torch.from_numpy(histories.users)
        return SequenceBatch(
            items=torch.from_numpy(items), mask=torch.from_numpy(items != 0), users=users
        )
