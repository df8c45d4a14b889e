"""TV-Rec: time-variant convolutional filters for sequential recommendation.

Shin et al., "TV-Rec: Time-Variant Convolutional Filter for Sequential
Recommendation", NeurIPS 2025; official PyTorch code yehjin-shin/TV-Rec (``model/tvrec.py``,
``model/_modules.py``, ``dataset.py``, ``trainers.py``, ``run.sh``), from the same line of code
as FMLP-Rec and BSARec. Written here from the paper and a reading of that code (no code copied).

Model (checked against the official code):

* **Embedding**: ``F0 = Dropout(LayerNorm(E[item]))`` over a window of exactly ``max_len``
  positions, left-padded; no position embedding (the filter is position-dependent itself).
  Before every block the PAD positions are set to zero.
* **Time-variant filter layer**: the window (length ``L``) is zero-padded on the right to
  ``N = L + K - 1`` nodes of a directed cycle graph (shift operator ``A``, ``(A x)[t] =
  x[t - 1 mod N]``); the filter is a node-variant graph filter of order ``K``,
  ``y[t] = sum_{k=0..K} h[t, k] (A^k x)[t] = sum_k h[t, k] x[(t - k) mod N]``, one tap vector
  per output position ``t``, shared by the ``D`` channels. The taps are
  ``h = Re(C B_n)``: ``C`` ``[N, M]`` real coefficients per position, ``B`` ``[M, K + 1]``
  complex basis filters, each row normalised to unit L2 norm (``B_n``). The official code
  computes the same operator through the graph Fourier transform of ``A`` (its eigenvectors:
  ``V (H_hat) V^-1`` with ``H_hat[t, n] = sum_k h[t, k] lambda_n^k``) and keeps its real part;
  here it is built directly as the ``[L, L]`` matrix ``W[t, s] = sum_{k: (t - k) mod N = s}
  h[t, k]``, equal up to floating-point error (a test checks it against the eigenvector form).
  Then ``LayerNorm(F + Dropout(y))``.
  The padding is one node short of a linear convolution: output 0 also sees the last input
  through tap ``K``, ``(0 - K) mod N = L - 1``. This is kept, as it is the model the
  authors trained (it reaches the last position only through the next layer).
* **Point-wise FFN**: ``LayerNorm(F + Dropout(W2 GELU(W1 F + b1) + b2))``, ``W1`` ``[4D, D]``.
* **Prediction**: ``score(i) = E[i] . F_t`` at the last position, the item embedding shared;
  full cross-entropy, plus ``ortho_weight`` times the basis orthogonality penalty
  ``sum_blocks ||R R^T - I||_F^2 + ||I' I'^T - I||_F^2`` (``R`` / ``I'``: the real / imaginary
  parts of ``B`` with unit-norm rows).

**Causality and training samples.** The taps depend on the absolute position in the window, so
a position inside a window computes something else than the same prefix at the window's end;
the official code therefore trains each prefix of each user's last ``max_len + 1`` training
items as its own left-padded sample with a non-empty input (input lengths 1 .. max_len,
``RecDataset`` for training), predicted from the last position only. Done the same way here
(``prefix_samples(..., empty=False)``); ``causal = False`` (position 0 sees the last item, see
above) and ``train_windows`` must stay ``"last"``.

Deviations and choices:

* ``n_basis`` (the official ``M``) must be >= 1; the official ``M <= 0`` variant (a free tap
  per position and order, identity basis) is not offered.
* PAD embedding row: zero here (the official row is a frozen N(0, 0.02) vector; PAD positions
  are zeroed before every block either way, so it matters only as a class of the official
  cross-entropy, which here covers the real items only). Other weights N(0, 0.02), biases zero,
  ``B`` and ``C`` N(0, 1e-3) as the official code, LayerNorm eps 1e-12.
* Optimiser: the shared trainer's AdamW (the official Adam has weight decay 0, where both
  coincide); early stopping on the configured validation metric (default NDCG@20, the
  official one) over full ranking with seen items at -inf (official: seen items at 0; the
  same @10 metrics on a trained model, ``docs/decisions/beat-published-protocol.md``).
* Width: ``dim = 128`` by default, the official recipes' 64 as an option
  (``docs/decisions/tvrec-width.md``).
* Label smoothing 0.1 by default (the official cross-entropy has none: ``label_smoothing =
  0``): it validated higher on every seed of Beauty and Sports
  (``docs/decisions/label-smoothing.md``).
* The last block computes its FFN only at the last position when only that one is needed;
  on CPU the other blocks compute theirs at the real positions only, since their outputs at PAD
  positions are zeroed before the next block reads them (the same values, and the same dropout
  stream: the mask is drawn over the whole window, then cut to the real positions).
* Last-position batches (every training step, scoring) run in groups of rows of similar
  length, each on the window cut to its longest row (``TVRecEncoder.last_groups``): the same
  values up to float rounding, with the dropout masks drawn per group over the cut windows, so
  not the random stream of the whole window (the distribution is the same).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from seqrec.data.batching import SequenceBatch
from seqrec.errors import ConfigError
from seqrec.models.fmlprec import FilterBlock, FMLPRec, FMLPRecConfig, WindowEncoder
from seqrec.models.layers import Dropout, tracing
from seqrec.models.neural_config import check_positive

TAP_INIT_STD = 1e-3
"""The official init of the basis filters and their coefficients."""


@dataclass(frozen=True)
class TVRecConfig(FMLPRecConfig):
    """TV-Rec hyperparameters (training defaults: ``train_defaults``).

    Defaults follow the official Beauty recipe (``run.sh``, ``output/TVRec_Beauty_best.log``):
    2 blocks, dropout 0.5, M = 32 basis filters of order K = 50, no orthogonality penalty,
    max_len 50; Adam lr 5e-4, betas (0.9, 0.999), batch 256 prefixes; the epoch of the best
    validation NDCG@20 is kept (the official selection). Two exceptions, each of which validated
    higher on every seed of Beauty and Sports: ``dim = 128`` (``docs/decisions/tvrec-width.md``;
    ``dim = 64`` is the paper's model) and label smoothing 0.1
    (``docs/decisions/label-smoothing.md``; ``label_smoothing = 0`` is the official loss). Use
    ``n_basis = 16`` on Sports (the official Sports recipe).
    """

    dim: int = 128
    """Embedding / hidden size d (the official recipes: 64)."""
    n_basis: int = 32
    """Number of basis filters ``M``."""
    order: int = 50
    """Filter order ``K``: taps 0 .. K (the official code fixes K = 50)."""
    ortho_weight: float = 0.0
    """Weight of the basis orthogonality penalty (official ``reg_weight``)."""
    train_defaults = {
        "betas": (0.9, 0.999),
        "batch_size": 256,  # samples (prefixes) per step, the official 256
        "lr": 5e-4,  # the official Beauty and Sports recipes
        "val_metric": "NDCG@20",  # the official selection
        "label_smoothing": 0.1,  # validated above the official one-hot target
    }

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive(self, "n_basis", "order")
        if self.ortho_weight < 0:
            raise ConfigError(f"ortho_weight must be >= 0, got {self.ortho_weight}")


def shift_taps(length: int, order: int) -> torch.Tensor:
    """One-hot ``[L, K + 1, L]``: ``S[t, k, s] = 1`` where ``(t - k) mod (L + K - 1) = s``."""
    n = length + order - 1
    t = np.arange(length)[:, None]
    src = (t - np.arange(order + 1)[None]) % n  # [L, K + 1]
    onehot = np.zeros((length, order + 1, length), np.float32)
    tt, kk = np.nonzero(src < length)
    onehot[tt, kk, src[tt, kk]] = 1.0
    return torch.from_numpy(onehot)


class TimeVariantFilter(nn.Module):
    """``LayerNorm(x + Dropout(W x))`` with ``W`` the ``[L, L]`` time-variant filter."""

    def __init__(self, length: int, cfg: TVRecConfig) -> None:
        super().__init__()
        n_nodes = length + cfg.order - 1
        self.basis = nn.Parameter(torch.randn(cfg.n_basis, cfg.order + 1, 2) * TAP_INIT_STD)
        self.coef = nn.Parameter(torch.randn(n_nodes, cfg.n_basis) * TAP_INIT_STD)
        self.register_buffer("shift", shift_taps(length, cfg.order), persistent=False)
        self.dropout = Dropout(cfg.dropout)
        self.norm = nn.LayerNorm(cfg.dim, eps=1e-12)

    def taps(self) -> torch.Tensor:
        """``h = Re(C B_n)`` ``[N, K + 1]`` (rows of ``B`` normalised over their complex taps)."""
        norm = self.basis.square().sum(dim=(1, 2)).sqrt()  # |B_m| over its complex taps
        return self.coef @ (self.basis[..., 0] / norm[:, None])  # real arithmetic (exportable)

    def matrix(self) -> torch.Tensor:
        """The filter as the ``[L, L]`` matrix applied along the window."""
        length = self.shift.shape[0]
        return torch.einsum("tk,tks->ts", self.taps()[:length], self.shift)

    def ortho_penalty(self) -> torch.Tensor:
        def gram_gap(m: torch.Tensor) -> torch.Tensor:
            m = F.normalize(m, p=2, dim=1)
            eye = torch.eye(m.shape[0], dtype=m.dtype, device=m.device)
            return (m @ m.T - eye).square().sum()

        return gram_gap(self.basis[..., 0]) + gram_gap(self.basis[..., 1])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x [B, w, D]``: the last ``w <= L`` positions of the window, the earlier ones all
        PAD (zero) in every row, so the filter's ``[L, L]`` matrix is cut to its last ``w``
        rows and columns (the same outputs there; ``w = L``: the whole window)."""
        w = x.shape[1]
        y = torch.einsum("ts,bsd->btd", self.matrix()[-w:, -w:].to(x.dtype), x)
        return self.norm(x + self.dropout(y))


def _rows_path(block: FilterBlock) -> bool:
    """Whether ``block.forward_rows`` keeps ``forward``'s dropout stream (layers.Dropout)."""
    d = block.dropout
    return type(d) is Dropout and not d.inplace


class TVRecEncoder(WindowEncoder):
    """TV-Rec's blocks over the window (:class:`WindowEncoder`), without position embeddings
    (the filter taps depend on the position in the window); PAD inputs are zeroed before each
    block."""

    def __init__(self, config: TVRecConfig, n_items: int) -> None:
        super().__init__(
            config,
            n_items,
            lambda cfg: FilterBlock(cfg, TimeVariantFilter(cfg.max_len, cfg)),
            positions=False,
        )

    last_groups = 4
    """Groups of rows of similar length a ``last_only`` batch is cut into (1: the whole window
    for every row)."""

    def forward(self, batch: SequenceBatch, last_only: bool = False) -> torch.Tensor:
        """:meth:`WindowEncoder.forward`; with ``last_only`` (training, scoring) the rows are
        sorted by how many window positions they span (from their first real item to the
        end), cut into :attr:`last_groups` groups of equal size, and each group runs on the
        window cut to its longest row: the positions before it are PAD in every row of the
        group, their inputs are zero, and the filter reads nothing else from them (see
        :meth:`TimeVariantFilter.forward`). The same outputs up to float rounding; in
        training the dropout masks are drawn group by group over the cut windows (another
        random stream than the whole window's)."""
        items = batch.items
        length, max_len = items.shape[1], self.config.max_len
        # a trace records one path for every batch: the whole window, decided before any size
        # is read (reading one would fix the trace's batch dimension)
        if (
            not last_only
            or tracing()
            or self.last_groups <= 1
            or not len(items)
            or length > max_len
        ):
            return super().forward(batch, last_only)
        real = items.ne(0)
        first = torch.where(real.any(1), real.to(torch.int8).argmax(1), length)
        span = (length - first).clamp_(min=1)  # positions from the first real item on
        order = torch.argsort(span, stable=True)
        parts = []
        for idx in torch.tensor_split(order, min(self.last_groups, len(order))):
            w = int(span[idx[-1]])  # sorted: the group's longest row is its last
            sub = items.index_select(0, idx)[:, length - w :]
            x = self.emb_dropout(self.emb_norm(self.item_emb(sub)))
            parts.append(self.run_blocks(x, sub, True)[:, -1])
        hidden = torch.cat(parts)  # rows in `order`
        return hidden.index_select(0, torch.argsort(order))[:, None]

    def run_blocks(self, x: torch.Tensor, items: torch.Tensor, last_only: bool) -> torch.Tensor:
        real = items.ne(0)[..., None]
        # A block's outputs at PAD positions are zeroed before the next block reads them, so
        # on CPU every block but the last runs its FFN at the real positions only
        # (FilterBlock.forward_rows: the same values, the same dropout stream); short
        # histories in a length-50 window are mostly PAD.
        rows = real.reshape(-1).nonzero().squeeze(1) if x.device.type == "cpu" else None
        for i, block in enumerate(self.blocks):
            last = i == len(self.blocks) - 1
            if rows is not None and not last and _rows_path(block):
                x = block.forward_rows(x * real, rows)
            else:
                x = block(x * real, last_only and last)  # PAD zeroed per block
        return x

    def ortho_penalty(self) -> torch.Tensor:
        return sum(block.filter.ortho_penalty() for block in self.blocks)


class TVRec(FMLPRec):
    """TV-Rec recommender (see the module docstring for the paper and deviations); trained on
    the official prefixes with a non-empty input."""

    name = "tvrec"
    config_cls = TVRecConfig
    encoder_cls = TVRecEncoder
    causal = False
    empty_prefix = False

    def compute_loss(self, data: dict) -> torch.Tensor:
        loss = super().compute_loss(data)
        if self.config.ortho_weight:
            loss = loss + self.config.ortho_weight * self.encoder.ortho_penalty()
        return loss
