"""NARM: Neural Attentive Session-based Recommendation (Li, Ren, Chen, Ren, Lian & Ma, CIKM 2017),
a baseline of the LRURec paper (Yue et al., WSDM 2024, Table 3).

A GRU encodes the item sequence into ``h_1..h_t``. The *global* encoder's representation is the
last state ``c_g = h_t``; the *local* encoder attends over all states with
``alpha_tj = v^T sigmoid(A_1 h_t + A_2 h_j)`` and ``c_l = sum_j alpha_tj h_j``. The session
representation ``c_t = [c_g; c_l]`` is decoded bilinearly: ``S_i = emb_i^T B c_t`` with the
input item embeddings ``emb`` (the official code shares them with the input) and
``B in R^{D x 2H}``. Here the hidden state handed to the shared losses is ``B c_t`` and the
prediction layer is the item embedding table, without bias (as the paper).

Where the paper leaves a choice open, this follows the authors' Theano code
(lijingsdu/sessionRec_NARM, ``NARM.py``):

* The attention weights are normalized with a softmax over the real positions
  (``attention_norm="softmax"``; the code's ``softmax(sim * mask) * mask`` renormalized); the
  paper's equation uses the raw weights (``"none"``).
* Dropout 0.25 on the item embeddings (``dropout_embed``) and 0.5 on ``c_t`` (``dropout``).
* Initialization: N(0, 2 / fan_in) for the embeddings, the GRU input matrices, A_1, A_2, v
  and B; orthogonal GRU recurrent matrices; zero GRU biases.

Deviations:

* Training: every position of a user's sequence is a training example (the hidden state at
  ``t`` attends over ``h_1..h_t`` only, so it is causal), with softmax cross-entropy over the
  whole catalogue as in the LRURec comparison; the paper trains one example per session prefix
  (the same objective, one prefix at a time) with Adam. The local attention at every position
  costs O(L^2 H) per sequence (the same total as one example per prefix), computed in chunks
  of query positions with a recomputing backward so memory stays O(chunk L H).
* ``sigmoid`` as in the paper (the code uses Theano's ``hard_sigmoid``). The code's GRU uses
  hard-sigmoid gates too; here it is ``torch.nn.GRU`` (standard sigmoid gates).
* Histories are user sequences cut to the last ``max_len`` items, not sessions.
* Training defaults (``SlidingRecipeConfig``): every transition once per epoch
  (``train_windows="sliding"``), lr 3e-3, patience 30, which validated better than the
  paper-style ``train_windows="last", lr=1e-3, patience=10`` (the LRURec table pins its own);
  evidence: ``docs/decisions/sliding-training-windows.md`` and
  ``docs/decisions/learning-rate-and-patience.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from seqrec.data.batching import SequenceBatch
from seqrec.errors import ConfigError
from seqrec.models.encoder import SequenceEncoder
from seqrec.models.gru4rec import run_left_padded
from seqrec.models.layers import Dropout
from seqrec.models.neural_config import (
    SLIDING_RECIPE,
    NeuralConfig,
    check_choice,
    check_positive,
    check_range,
)
from seqrec.models.torch_recommender import TorchRecommender

# elements of one [B, chunk, L, H] attention block (keeps a chunk near 64 MB in float32)
_BLOCK = 1 << 24


@dataclass(frozen=True)
class NARMConfig(NeuralConfig):
    """NARM hyperparameters (training defaults from the
    sliding-window recipe)."""

    train_defaults = SLIDING_RECIPE

    dim: int = 64
    """Item embedding size D (the paper: 50)."""
    hidden: int = 64
    """GRU hidden size H (the paper: 100)."""
    dropout: float = 0.5
    """Dropout on the session representation c_t (the code: 0.5)."""
    dropout_embed: float = 0.25
    """Dropout on the item embeddings (the code: 0.25)."""
    attention_norm: str = "softmax"
    """'softmax' over the real positions (authors' code) or 'none' (the paper's raw weights)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive(self, "dim", "hidden")
        check_range(self, "dropout", 0.0, 0.99)
        check_range(self, "dropout_embed", 0.0, 0.99)
        check_choice(self, "attention_norm", ("softmax", "none"))


class _AdditiveEnergy(torch.autograd.Function):
    """``e[b, c, k] = v . sigmoid(q[b, c] + k[b, k])`` without keeping the ``[B, C, K, H]`` block:
    the backward pass recomputes it (one fused sigmoid-backward, two sums), which is both the
    memory and most of the time of NARM's per-position local attention."""

    @staticmethod
    def forward(ctx, query, keys, v):  # [B, C, H], [B, K, H], [H] -> [B, C, K]
        ctx.save_for_backward(query, keys, v)
        return torch.add(query[:, :, None, :], keys[:, None, :, :]).sigmoid_() @ v

    @staticmethod
    def backward(ctx, grad):  # [B, C, K]
        query, keys, v = ctx.saved_tensors
        s = torch.add(query[:, :, None, :], keys[:, None, :, :]).sigmoid_()
        h = s.shape[-1]
        grad_v = (grad.reshape(1, -1) @ s.reshape(-1, h)).reshape(h)
        pre = torch.ops.aten.sigmoid_backward(v.expand_as(s), s).mul_(grad[..., None])
        return pre.sum(2), pre.sum(1), grad_v


def _attend(
    query: torch.Tensor,
    keys: torch.Tensor,
    states: torch.Tensor,
    v: torch.Tensor,
    allowed: torch.Tensor,
    softmax: bool,
) -> torch.Tensor:
    """Local context of a chunk of query positions.

    ``query [B, C, H]`` (A_1 h_t), ``keys [B, K, H]`` (A_2 h_j), ``states [B, K, H]`` (h_j),
    ``v [H]``, ``allowed [B, C, K]`` -> ``[B, C, H]``.
    """
    if torch.jit.is_tracing() or torch.compiler.is_exporting():  # export: plain ops, same value
        energy = torch.add(query[:, :, None, :], keys[:, None, :, :]).sigmoid() @ v
    else:
        energy = _AdditiveEnergy.apply(query, keys, v)  # [B, C, K]
    if softmax:
        weights = torch.softmax(energy.masked_fill(~allowed, float("-inf")), dim=-1)
    else:
        weights = energy * allowed
    return weights @ states


class NARMEncoder(SequenceEncoder):
    """``[B, L]`` left-padded items -> ``[B, L, D]`` decoded session representations ``B c_t``."""

    def __init__(self, config: NARMConfig, n_items: int) -> None:
        super().__init__()
        self.config, self.n_items = config, n_items
        d, h = config.dim, config.hidden
        self.item_emb = nn.Embedding(n_items + 1, d, padding_idx=0)
        self.embed_dropout = Dropout(config.dropout_embed)
        self.gru = nn.GRU(d, h, batch_first=True)
        self.a_query = nn.Linear(h, h, bias=False)  # A_1 (the code's W_decoder, on h_t)
        self.a_key = nn.Linear(h, h, bias=False)  # A_2 (the code's W_encoder, on h_j)
        self.v = nn.Parameter(torch.empty(h))
        self.dropout = Dropout(config.dropout)
        self.bilinear = nn.Linear(2 * h, d, bias=False)  # B
        self.reset_parameters()

    def reset_parameters(self) -> None:
        d, h = self.config.dim, self.config.hidden

        def normal(w: torch.Tensor, fan_in: int) -> None:  # the code's init_weights
            nn.init.normal_(w, 0.0, math.sqrt(2.0 / fan_in))

        normal(self.item_emb.weight, self.n_items)
        for gate in range(3):
            normal(self.gru.weight_ih_l0[gate * h : (gate + 1) * h], d)
            nn.init.orthogonal_(self.gru.weight_hh_l0[gate * h : (gate + 1) * h])
        nn.init.zeros_(self.gru.bias_ih_l0)
        nn.init.zeros_(self.gru.bias_hh_l0)
        normal(self.a_query.weight, h)
        normal(self.a_key.weight, h)
        normal(self.v, 1)
        normal(self.bilinear.weight, d)
        with torch.no_grad():
            self.item_emb.weight[0].zero_()

    def forward(self, batch: SequenceBatch, last_only: bool = False) -> torch.Tensor:
        items = batch.items
        length = items.shape[1]
        if length > self.config.max_len:
            raise ConfigError(f"input length {length} exceeds max_len {self.config.max_len}")
        valid = batch.mask if batch.mask is not None else items.ne(0)
        states = run_left_padded(self.gru, self.embed_dropout(self.item_emb(items)), valid)
        keys = self.a_key(states)  # [B, L, H]
        first = length - 1 if last_only else 0
        queries = self.a_query(states[:, first:])  # [B, Lq, H]
        pos = torch.arange(length, device=items.device)
        eye = torch.eye(length, dtype=torch.bool, device=items.device)
        softmax = self.config.attention_norm == "softmax"
        chunk = max(1, _BLOCK // max(1, items.shape[0] * length * self.config.hidden))
        local = []
        for start in range(first, length, chunk):
            stop = min(start + chunk, length)
            # keys j <= t < stop only (causal); a PAD query sees itself so softmax has a key
            allowed = (
                (pos[None, :stop] <= pos[start:stop, None])[None] & valid[:, None, :stop]
            ) | eye[None, start:stop, :stop]
            local.append(
                _attend(
                    queries[:, start - first : stop - first],
                    keys[:, :stop],
                    states[:, :stop],
                    self.v,
                    allowed,
                    softmax,
                )
            )
        c_local = torch.cat(local, dim=1)  # [B, Lq, H]
        context = torch.cat([states[:, first:], c_local], dim=-1)  # [c_g; c_l]
        out = self.bilinear(self.dropout(context))
        return out * valid[:, first:, None].to(out.dtype)

    def encode_last(self, batch: SequenceBatch) -> torch.Tensor:  # [B, D]
        return self.forward(batch, last_only=True)[:, -1]

    def output_embeddings(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        return self.item_emb.weight, None


class NARM(TorchRecommender):
    """NARM: GRU with global and local attention, bilinear decoder (Li et al., CIKM 2017); see
    the module docstring for the deviations."""

    name = "narm"
    config_cls = NARMConfig
    encoder_cls = NARMEncoder
