"""FMLP-Rec: filter-enhanced all-MLP sequential recommender.

Zhou, Yu, Zhao, Wen, "Filter-enhanced MLP is All You Need for Sequential Recommendation",
WWW 2022; official PyTorch code Woeee/FMLP-Rec (``models.py``, ``modules.py``, ``datasets.py``,
``trainers.py``, ``main.py``).

Model (paper Sec. 3, checked against the official code):

* **Embedding**: ``F0 = Dropout(LayerNorm(E[item] + P[position]))`` over a window of exactly
  ``max_len`` positions (shorter histories are left-padded to ``max_len``).
* **Learnable filter layer**: ``X = FFT(F)`` along the sequence (``rfft``, orthonormal),
  ``X' = W (.) X`` with a learnable complex filter ``W`` ``[max_len // 2 + 1, D]``,
  ``F' = IFFT(X')`` (``irfft``, orthonormal), then ``LayerNorm(F + Dropout(F'))``. Multiplying
  spectra is a circular convolution over the window with a learnable kernel per channel.
* **Point-wise FFN**: ``LayerNorm(F + Dropout(W2 GELU(W1 F + b1) + b2))``, ``W1`` ``[4D, D]``.
* **Prediction**: ``score(i) = E[i] . F_t`` at the last position, the item embedding shared.

**Causality.** The filter mixes the whole window: position ``t`` sees ``t + 1..``, and PAD
positions are filter inputs too. The official code therefore never trains on every position:
each prefix of each user's last ``max_len`` training items is a separate sample, left-padded to
``max_len``, whose last item is predicted from the last position only (``FMLPRecDataset``,
``cross_entropy`` on ``seq_out[:, -1]``). This class does the same, so it is marked
``causal = False``: its per-position outputs are not next-item predictions and the conformance
suite skips the causal check. The output for a history depends only on its last ``max_len``
items; because the encoder always pads to ``max_len`` itself, extra left padding changes
nothing (the padding-invariance check holds exactly), but ``max_len`` is part of the model.

Deviations and choices:

* Loss: ``loss="ce"`` (default) is full cross-entropy at the predicted position, as in the
  LRURec comparison; the official code's objective is ``loss="bce"`` (one negative per sample;
  the paper writes it as a pairwise ranking loss). The negative avoids the user's whole
  training history; the official one avoids only the items of the sample's prefix.
* Training samples: the prefixes are exactly the official ones, including the one with an
  empty input (all PAD) that predicts the user's first item of the window. ``train_windows``
  has no meaning here and must stay ``"last"``.
* PAD embedding row: zero here; the official code re-initialises it with N(0, 0.02) after
  construction (a frozen random vector, as ``padding_idx`` blocks its gradient). Other weights
  N(0, 0.02), biases zero, filter ``N(0, 1) * 0.02`` as the official code.
* Optimiser: AdamW (``weight_decay`` decoupled; the official Adam adds L2 to the gradient, and
  uses 0 by default, where both coincide). Early stopping on validation NDCG@10 over full
  ranking (the official code stops on MRR over 99 sampled negatives unless ``--full_sort``).
* The last block computes its FFN only at the last position when only that one is needed
  (``encode_last`` and training): identical outputs, less work.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from seqrec.data.batching import SequenceBatch
from seqrec.data.sequences import Sequences
from seqrec.errors import ConfigError
from seqrec.models.encoder import SequenceEncoder
from seqrec.models.layers import Dropout, dropout_rows
from seqrec.models.neural_config import (
    NeuralConfig,
    RunConfig,
    TrainConfig,
    check_positive,
    check_range,
)
from seqrec.models.torch_recommender import TorchRecommender

INIT_STD = 0.02


@dataclass(frozen=True)
class FMLPRecConfig(NeuralConfig):
    """FMLP-Rec hyperparameters (training defaults: ``train_defaults``).

    Defaults follow the official ``main.py``: d = 64, 2 blocks, dropout 0.5, Adam lr 1e-3,
    betas (0.9, 0.999), batch 256, max_len 50.
    """

    dim: int = 64
    """Embedding / hidden size d."""
    n_blocks: int = 2
    """Number of filter + FFN blocks."""
    dropout: float = 0.5
    """Dropout after the embedding, on the filter output and on the FFN output."""
    ffn_dim: int = 0
    """FFN inner size (0 = 4 d, as the official code)."""
    train_defaults = {
        "betas": (0.9, 0.999),  # the official defaults
        "batch_size": 256,  # samples (prefixes) per step, the official 256
    }

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive(self, "dim", "n_blocks")
        check_range(self, "dropout", 0.0, 0.99)
        if self.ffn_dim < 0:
            raise ConfigError(f"ffn_dim must be >= 0, got {self.ffn_dim}")

    def check_training(self, train: TrainConfig, run: RunConfig) -> None:
        super().check_training(train, run)
        label = type(self).__name__.removesuffix("Config")
        if train.train_windows != "last":
            raise ConfigError(
                f"{label} trains on every prefix of the last max_len items; "
                f"train_windows must be 'last', got {train.train_windows!r}"
            )
        if not train.batch_size:
            raise ConfigError(
                f"batch_size = 0 (batch_targets) is not supported by {label}: each "
                "prefix sample has one target, so batch_size already counts targets"
            )


class FilterLayer(nn.Module):
    """``LayerNorm(x + Dropout(irfft(W * rfft(x))))`` along the sequence axis of ``[B, L, D]``."""

    def __init__(self, length: int, dim: int, dropout: float) -> None:
        super().__init__()
        self.length = length
        # [L // 2 + 1, D] complex filter stored as (real, imag) pairs
        self.weight = nn.Parameter(torch.randn(length // 2 + 1, dim, 2) * INIT_STD)
        self.dropout = Dropout(dropout)
        self.norm = nn.LayerNorm(dim, eps=1e-12)

    def filter(self, x: torch.Tensor) -> torch.Tensor:
        """The frequency-domain filter alone (a circular convolution along dim 1)."""
        spec = torch.fft.rfft(x, dim=1, norm="ortho") * torch.view_as_complex(self.weight)
        return torch.fft.irfft(spec, n=self.length, dim=1, norm="ortho")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x + self.dropout(self.filter(x)))


class FilterBlock(nn.Module):
    """A sequence filter (``filter_layer``: FMLP-Rec's learnable frequency filter, TV-Rec's
    time-variant one) then the post-LN GELU feed-forward of the FMLP-Rec line."""

    def __init__(self, cfg: Any, filter_layer: nn.Module) -> None:
        super().__init__()
        d, inner = cfg.dim, cfg.ffn_dim or 4 * cfg.dim
        self.filter = filter_layer
        self.fc1 = nn.Linear(d, inner)
        self.fc2 = nn.Linear(inner, d)
        self.ffn_norm = nn.LayerNorm(d, eps=1e-12)
        self.dropout = Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        x = self.filter(x)
        if last_only:  # the FFN is position-wise: only the position that is read
            x = x[:, -1:]
        return self.ffn_norm(x + self.dropout(self.fc2(F.gelu(self.fc1(x)))))

    def forward_rows(self, x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """``forward`` where only the positions ``rows`` (of the window flattened to
        ``[B L]``) are read next: the filter runs over the whole window, the FFN and its norm at
        those positions only; the others are 0. On CPU in training the FFN's dropout mask is
        drawn over the whole window first (:func:`~seqrec.models.layers.dropout_rows`), so
        the random stream and the masks at ``rows`` are ``forward``'s."""
        x = self.filter(x)
        shape = x.shape
        h = x.reshape(-1, shape[-1]).index_select(0, rows)
        z = dropout_rows(self.dropout, self.fc2(F.gelu(self.fc1(h))), shape, rows)
        y = self.ffn_norm(h + z)
        return y.new_zeros(shape[0] * shape[1], shape[-1]).index_copy(0, rows, y).view(shape)


class WindowEncoder(SequenceEncoder):
    """The encoder shape of the FMLP-Rec line (FMLP-Rec, BSARec, TV-Rec): ``[B, L]``
    left-padded items (``L <= max_len``) -> ``[B, L, D]``, the window padded to exactly
    ``max_len`` first (the frequency-domain layers span the whole window, so PAD positions are
    their inputs and carry outputs); ``Dropout(LayerNorm(E[item] (+ P[position])))`` in,
    ``blocks`` in turn (:meth:`run_blocks`), N(0, 0.02) weights, the item table shared with the
    output."""

    pads_to_max_len = True
    """Every batch runs ``max_len`` positions (scoring budgets its batches by that)."""

    def __init__(self, config: Any, n_items: int, make_block: Any, positions: bool = True) -> None:
        super().__init__()
        self.config, self.n_items = config, n_items
        d = config.dim
        self.item_emb = nn.Embedding(n_items + 1, d, padding_idx=0)
        self.pos_emb = nn.Embedding(config.max_len, d) if positions else None
        self.emb_norm = nn.LayerNorm(d, eps=1e-12)
        self.emb_dropout = Dropout(config.dropout)
        self.blocks = nn.ModuleList(make_block(config) for _ in range(config.n_blocks))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for mod in self.modules():
            if isinstance(mod, (nn.Linear, nn.Embedding)):
                nn.init.normal_(mod.weight, 0.0, INIT_STD)
            if isinstance(mod, nn.Linear):
                nn.init.zeros_(mod.bias)
        with torch.no_grad():
            self.item_emb.weight[0].zero_()

    def run_blocks(self, x: torch.Tensor, items: torch.Tensor, last_only: bool) -> torch.Tensor:
        """The blocks over the embedded window ``x`` of padded ``items``; the last one only at
        the last position when ``last_only``."""
        for i, block in enumerate(self.blocks):
            x = block(x, last_only and i == len(self.blocks) - 1)
        return x

    def forward(self, batch: SequenceBatch, last_only: bool = False) -> torch.Tensor:
        items = batch.items
        length, max_len = items.shape[1], self.config.max_len
        if length > max_len:
            raise ConfigError(f"input length {length} exceeds max_len {max_len}")
        items = F.pad(items, (max_len - length, 0))  # the layers span exactly max_len
        x = self.item_emb(items)
        if self.pos_emb is not None:
            x = x + self.pos_emb(torch.arange(max_len, device=items.device))[None]
        x = self.run_blocks(self.emb_dropout(self.emb_norm(x)), items, last_only)
        return x if last_only else x[:, max_len - length :]

    def encode_last(self, batch: SequenceBatch) -> torch.Tensor:
        """Output of the last position ``[B, D]``; the last block runs only there."""
        return self.forward(batch, last_only=True)[:, -1]

    def output_embeddings(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        return self.item_emb.weight, None


class FMLPRecEncoder(WindowEncoder):
    """FMLP-Rec's filter + FFN blocks over the window (:class:`WindowEncoder`)."""

    def __init__(self, config: FMLPRecConfig, n_items: int) -> None:
        super().__init__(
            config,
            n_items,
            lambda cfg: FilterBlock(cfg, FilterLayer(cfg.max_len, cfg.dim, cfg.dropout)),
        )


def prefix_samples(
    train: Sequences, max_len: int, empty: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The official training samples: every prefix of each row's last items.

    ``empty=True`` (FMLP-Rec, BSARec): the prefixes of the last ``max_len`` items, the first
    with an empty input (input lengths 0 .. max_len - 1). ``empty=False`` (TV-Rec): the
    prefixes of the last ``max_len + 1`` items with a non-empty input (lengths 1 .. max_len).
    Returns, per sample, its row, the flat index (into ``train.items``) of its target item and
    its input length (the input is the items just before the target).
    """
    lengths = train.lengths
    m = np.minimum(lengths, max_len if empty else max_len + 1)
    skip = 0 if empty else 1  # the prefix with an empty input
    n = np.maximum(m - skip, 0)
    row = np.repeat(np.arange(len(train), dtype=np.int64), n)
    first = np.repeat(np.cumsum(n) - n, n)
    k = np.arange(int(n.sum()), dtype=np.int64) - first + skip  # input lengths within the row
    window_start = train.offsets[:-1] + lengths - m
    return row, window_start[row] + k, k


class FMLPRec(TorchRecommender):
    """FMLP-Rec recommender (see the module docstring for the paper and deviations)."""

    name = "fmlprec"
    config_cls = FMLPRecConfig
    encoder_cls = FMLPRecEncoder
    causal = False
    empty_prefix = True
    """Whether the prefix with an empty input is a training sample (see ``prefix_samples``)."""

    def training_rows(self, train: Sequences) -> tuple[Sequences, np.ndarray | None, np.ndarray]:
        """One epoch = every prefix sample once; ``source`` maps a sample to its user row."""
        row, self._target_at, self._input_len = prefix_samples(
            train, self.config.max_len, self.empty_prefix
        )
        return train, row, np.arange(len(row), dtype=np.int64)

    def make_batch(self, train: Sequences, rows: np.ndarray, rng: np.random.Generator) -> dict:
        """Left-padded prefix inputs ``[B, max_len]``; the target sits at the last column."""
        max_len = self.config.max_len
        at, n = self._target_at[rows], self._input_len[rows]
        inputs = np.zeros((len(rows), max_len), np.int64)
        total = int(n.sum())
        if total:
            b = np.repeat(np.arange(len(rows)), n)
            j = np.arange(total) - np.repeat(np.cumsum(n) - n, n)  # 0 .. n - 1
            inputs[b, max_len - np.repeat(n, n) + j] = train.items[np.repeat(at - n, n) + j]
        targets = np.zeros_like(inputs)
        targets[:, -1] = train.items[at]
        batch = SequenceBatch(
            items=torch.from_numpy(inputs),
            mask=torch.from_numpy(inputs != 0),
            targets=torch.from_numpy(targets),
        )
        return {"batch": batch, **self.negatives(rows, rng)}

    def compute_loss(self, data: dict) -> torch.Tensor:
        batch: SequenceBatch = data["batch"].to(self.device)
        hidden = self.train_forward(batch, last_only=True)  # [B, 1, D]
        if self.train_config.loss == "bce":  # one negative per position: keep the predicted one's
            data = {**data, "negatives": data["negatives"][:, -1:]}
        return self.loss_at(hidden, batch.targets[:, -1:], data)
