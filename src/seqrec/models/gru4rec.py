"""GRU4Rec: session-based recommendation with recurrent neural networks (Hidasi, Karatzoglou,
Baltrunas & Tikk, ICLR 2016; Hidasi & Karatzoglou, "Recurrent Neural Networks with Top-k Gains
for Session-based Recommendations", CIKM 2018), a baseline of the LRURec and LSAN papers.

A stack of GRU layers reads the item sequence; the last layer's output ``h_t`` at position ``t``
scores every item as ``h_t^T W_y[i] + b_y[i]`` (softmax over the catalogue). Where the papers
leave a choice open, this follows the official implementation (hidasib/GRU4Rec and its PyTorch
port GRU4Rec_PyTorch_Official, ``GRU4RecModel``):

* ``embedding="tied"`` (default, the official ``constrained_embedding=True`` used by its
  best-parameter files): the input embedding of an item is its row of the output matrix
  ``W_y``, so the input size equals the last layer's size. ``"separate"`` learns its own input
  table (the official ``embedding=N``, with N = ``dim``).
* Output bias ``b_y`` (the official ``By``), initialized at zero.
* Dropout on the input embedding (``dropout_embed``, official ``dropout_p_embed``) and on the
  output of every GRU layer (``dropout``, official ``dropout_p_hidden``).
* Initialization of the official compatibility mode: every matrix (each gate's input and
  recurrent matrix, ``W_y``, the separate embedding) uniform in +-sqrt(6 / (fan_in + fan_out)),
  GRU biases zero.

Deviations:

* Training: the official code trains with session-parallel mini-batches (one step per event,
  hidden states carried across steps) and Adagrad; here, as in the LRURec comparison, each
  user's (windowed) sequence is run through the GRU from a zero state and the softmax
  cross-entropy over the whole catalogue is taken at every position at once (the official
  ``cross-entropy`` loss scores the mini-batch's targets plus ``n_sample`` popularity-sampled
  negatives instead of every item), optimized with AdamW.
  ``loss`` can select the shared BCE / sampled-softmax / gBCE losses instead.
* The official "one-hot" input (``embedding=0, constrained_embedding=False``: the first GRU
  layer's input weights indexed by item id) is not offered; it is an unconstrained 3H-wide
  item table feeding the gates, which ``"separate"`` approximates.
* Histories are user sequences cut to the last ``max_len`` items, not sessions.
* Training defaults (``SlidingRecipeConfig``): every transition once per epoch
  (``train_windows="sliding"``), lr 3e-3, patience 30, which validated better than the
  paper-style ``train_windows="last", lr=1e-3, patience=10`` (the LSAN and LRURec tables pin
  theirs); evidence: ``docs/decisions/sliding-training-windows.md`` and
  ``docs/decisions/learning-rate-and-patience.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from seqrec.data.batching import SequenceBatch
from seqrec.errors import ConfigError
from seqrec.models.encoder import SequenceEncoder
from seqrec.models.layers import Dropout, roll_rows
from seqrec.models.neural_config import (
    SLIDING_RECIPE,
    NeuralConfig,
    check_choice,
    check_positive,
    check_range,
)
from seqrec.models.torch_recommender import TorchRecommender


def run_left_padded(rnn: nn.Module, x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Run a batch-first ``nn.GRU``/``nn.LSTM`` over left-padded ``x [B, L, D_in]`` from a zero
    state, skipping PAD positions: ``[B, L, H]`` outputs, 0 at PAD positions.

    Each row is rotated so that its real items start at position 0, packed with its length (so
    PAD steps never touch the state: outputs do not depend on how much padding there is) and
    rotated back.
    """
    b, length = valid.shape
    lengths = valid.sum(1)
    shift = length - lengths  # leading PAD count per row
    x_left = roll_rows(x, shift)  # left-aligned j <- right-aligned j + shift
    packed = pack_padded_sequence(
        x_left, lengths.clamp(min=1).cpu(), batch_first=True, enforce_sorted=False
    )
    out, _ = rnn(packed)
    out, _ = pad_packed_sequence(out, batch_first=True, total_length=length)  # [B, L, H]
    out = roll_rows(out, -shift)
    return out * valid[..., None].to(out.dtype)


def uniform_glorot_(tensor: torch.Tensor, fan_in: int, fan_out: int) -> torch.Tensor:
    """Uniform in +-sqrt(6 / (fan_in + fan_out)) (the official GRU4Rec initialization)."""
    sigma = math.sqrt(6.0 / (fan_in + fan_out))
    with torch.no_grad():
        return tensor.uniform_(-sigma, sigma)


@dataclass(frozen=True)
class GRU4RecConfig(NeuralConfig):
    """GRU4Rec hyperparameters (training defaults from the
    sliding-window recipe)."""

    train_defaults = SLIDING_RECIPE

    dim: int = 64
    """Size of every GRU layer (and of the item embeddings)."""
    n_layers: int = 1
    """Number of stacked GRU layers (the official default is one layer)."""
    embedding: str = "tied"
    """'tied': the input embedding is the output matrix W_y (official constrained_embedding);
    'separate': a separate input table of size dim."""
    dropout: float = 0.2
    """Dropout on the output of every GRU layer (official dropout_p_hidden)."""
    dropout_embed: float = 0.0
    """Dropout on the input embeddings (official dropout_p_embed)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive(self, "dim", "n_layers")
        check_choice(self, "embedding", ("tied", "separate"))
        check_range(self, "dropout", 0.0, 0.99)
        check_range(self, "dropout_embed", 0.0, 0.99)


class GRU4RecEncoder(SequenceEncoder):
    """``[B, L]`` left-padded items -> ``[B, L, dim]`` last-layer GRU outputs."""

    def __init__(self, config: GRU4RecConfig, n_items: int) -> None:
        super().__init__()
        self.config, self.n_items = config, n_items
        d = config.dim
        self.out_emb = nn.Embedding(n_items + 1, d, padding_idx=0)  # W_y
        self.out_bias = nn.Parameter(torch.zeros(n_items + 1))  # b_y
        self.in_emb = (
            nn.Embedding(n_items + 1, d, padding_idx=0) if config.embedding == "separate" else None
        )
        self.embed_dropout = Dropout(config.dropout_embed)
        # one single-layer GRU per layer: the official code drops out after every layer,
        # the last one included (nn.GRU's inter-layer dropout skips the last)
        self.grus = nn.ModuleList(nn.GRU(d, d, batch_first=True) for _ in range(config.n_layers))
        self.dropout = Dropout(config.dropout)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        d = self.config.dim
        uniform_glorot_(self.out_emb.weight, self.n_items, d)
        if self.in_emb is not None:
            uniform_glorot_(self.in_emb.weight, self.n_items, d)
        for gru in self.grus:
            for gate in range(3):  # each gate's matrix on its own, as the official code
                uniform_glorot_(gru.weight_ih_l0[gate * d : (gate + 1) * d], d, d)
                uniform_glorot_(gru.weight_hh_l0[gate * d : (gate + 1) * d], d, d)
            nn.init.zeros_(gru.bias_ih_l0)
            nn.init.zeros_(gru.bias_hh_l0)
        with torch.no_grad():
            self.out_emb.weight[0].zero_()
            if self.in_emb is not None:
                self.in_emb.weight[0].zero_()

    def forward(self, batch: SequenceBatch) -> torch.Tensor:  # [B, L, D]
        items = batch.items
        if items.shape[1] > self.config.max_len:
            raise ConfigError(
                f"input length {items.shape[1]} exceeds max_len {self.config.max_len}"
            )
        valid = batch.mask if batch.mask is not None else items.ne(0)
        table = self.in_emb if self.in_emb is not None else self.out_emb
        x = self.embed_dropout(table(items))
        for gru in self.grus:
            x = self.dropout(run_left_padded(gru, x, valid))
        return x

    def output_embeddings(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        return self.out_emb.weight, self.out_bias

    def no_decay_names(self) -> set[str]:
        return super().no_decay_names() | {"out_bias"}


class GRU4Rec(TorchRecommender):
    """GRU4Rec (Hidasi et al., ICLR 2016 / CIKM 2018) with the official code's choices; see the
    module docstring for the deviations."""

    name = "gru4rec"
    config_cls = GRU4RecConfig
    encoder_cls = GRU4RecEncoder

    def incremental(self, slide: str = "exact", stride: int = 0):
        """The live-session encoder: the hidden state of every GRU layer
        (:mod:`seqrec.models.kv_cache`).

        ``slide`` / ``stride``: what happens beyond ``max_len`` (see there)."""
        from seqrec.models.kv_cache import GRU4RecRecurrent, cached_encoder

        return cached_encoder(self, GRU4RecRecurrent, slide=slide, stride=stride)
