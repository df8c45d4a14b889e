"""BSARec: beyond self-attention, an attentive inductive bias from the frequency domain.

Shin, Choi, Wi, Park, "An Attentive Inductive Bias for Sequential Recommendation beyond the
Self-Attention", AAAI 2024; official PyTorch code yehjin-shin/BSARec (``src/model/bsarec.py``,
``src/model/_modules.py``, ``src/dataset.py``, ``src/trainers.py``), itself built on FMLP-Rec's
code. Written here from the paper and a reading of that code (no code copied).

Model (paper Sec. 4, checked against the official code):

* **Embedding**: ``F0 = Dropout(LayerNorm(E[item] + P[position]))`` over a window of exactly
  ``max_len`` positions (shorter histories are left-padded), as FMLP-Rec.
* **Beyond-self-attention layer**: ``alpha * DSP(F) + (1 - alpha) * GSP(F)``, where
  ``GSP`` is multi-head self-attention with its output projection, attention-weight dropout,
  hidden dropout and a post-LN residual, ``LayerNorm(F + Dropout(W_O Attn(F)))`` (causal, PAD
  keys masked), and ``DSP`` is the inductive bias: with ``X = rfft(F)`` along the sequence
  (orthonormal), the low-pass part ``LP = irfft(X with bins >= c // 2 + 1 zeroed)`` keeps the
  ``c // 2 + 1`` lowest frequencies, the high-pass part is ``HP = F - LP``, and
  ``DSP(F) = LayerNorm(F + Dropout(LP + beta^2 (.) HP))`` with ``beta`` a learned vector of
  ``D`` scales (one per channel, initialised N(0, 1) as the official ``sqrt_beta``).
* **Point-wise FFN**: ``LayerNorm(F + Dropout(W2 GELU(W1 F + b1) + b2))``, ``W1`` ``[4D, D]``.
* **Prediction**: ``score(i) = E[i] . F_t`` at the last position, the item embedding shared;
  full cross-entropy over the catalogue.

**Causality and training samples.** The FFT mixes the whole window (position ``t`` sees
``t + 1 ..``, and PAD positions are filter inputs), so, as the official code, each prefix of
each user's last ``max_len`` training items is its own left-padded sample whose last item is
predicted from the last position only, the one with an empty input included (the official
``RecDataset`` for training). This is FMLP-Rec's sample set (``seqrec.models.fmlprec``); the
class is ``causal = False`` and ``train_windows`` must stay ``"last"``.

**Attention mask.** As the official code, the mask is additive: ``-10000`` on keys that are PAD
or in the future. A query whose allowed keys are all PAD (a query inside the left padding)
therefore attends over its causal keys with unmasked weights, exactly as the official model
does; those outputs enter the FFT of the real positions.

Deviations and choices:

* PAD embedding row: zero here; the official code re-initialises it with N(0, 0.02) after
  construction (a frozen random vector: ``padding_idx`` blocks its gradient) and keeps PAD as a
  class of its cross-entropy; here the loss and the ranking cover the real items only.
  Other weights N(0, 0.02), biases zero, LayerNorm eps 1e-12 as the official code.
* Optimiser: the shared trainer's AdamW (decoupled ``weight_decay``; the official Adam has
  weight decay 0, where both coincide). Early stopping on the configured validation metric over
  full ranking with the history filtered (seen items at -inf; the official filter sets them to
  0, which gives the same @10 metrics on a trained model:
  ``docs/decisions/beat-published-protocol.md``); the official code stops on NDCG@20.
* The last block computes its attention query and FFN only at the last position when only that
  one is needed (``encode_last`` and training): identical outputs, less work.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from seqrec.errors import ConfigError
from seqrec.models.fmlprec import FMLPRec, FMLPRecConfig, WindowEncoder
from seqrec.models.layers import Dropout
from seqrec.models.neural_config import check_positive, check_range

MASKED = -10000.0
"""The official additive attention mask value (not -inf: see the module docstring)."""


@dataclass(frozen=True)
class BSARecConfig(FMLPRecConfig):
    """BSARec hyperparameters (training defaults: ``train_defaults``).

    Defaults follow the official Beauty recipe (``src/output/BSARec_Beauty_best.log``): d = 64,
    2 blocks, 1 head, dropout 0.5 (hidden and attention weights), alpha 0.7, c 5, max_len 50;
    Adam lr 5e-4, betas (0.9, 0.999), batch 256 prefixes.
    """

    n_heads: int = 1
    """Attention heads (``dim`` must be a multiple)."""
    attn_dropout: float = 0.5
    """Dropout on the attention weights (official ``attention_probs_dropout_prob``)."""
    alpha: float = 0.7
    """Weight of the frequency-domain inductive bias; ``1 - alpha`` weights self-attention."""
    c: int = 5
    """Low-pass cut: the ``c // 2 + 1`` lowest rfft bins are the low-pass part."""
    train_defaults = {
        "betas": (0.9, 0.999),
        "batch_size": 256,  # samples (prefixes) per step, the official 256
        "lr": 5e-4,  # the official Beauty recipe
    }

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive(self, "n_heads", "c")
        check_range(self, "attn_dropout", 0.0, 0.99)
        check_range(self, "alpha", 0.0, 1.0)
        if self.dim % self.n_heads:
            raise ConfigError(f"dim ({self.dim}) must be a multiple of n_heads ({self.n_heads})")
        if self.c // 2 + 1 > self.max_len // 2 + 1:
            raise ConfigError(
                f"c = {self.c} keeps {self.c // 2 + 1} frequency bins, more than the "
                f"{self.max_len // 2 + 1} a window of max_len = {self.max_len} has"
            )


def low_pass_matrix(length: int, keep: int) -> torch.Tensor:
    """``[L, L]`` real matrix of ``irfft(rfft(x) with bins >= keep zeroed)`` (orthonormal):
    the official low-pass is linear along the sequence, so it is applied as one matmul (the
    same values as the FFT form, and a graph that ONNX can export)."""
    spec = torch.fft.rfft(torch.eye(length, dtype=torch.float64), dim=0, norm="ortho")
    spec[keep:] = 0
    return torch.fft.irfft(spec, n=length, dim=0, norm="ortho")  # float64, cast where used


class FrequencyLayer(nn.Module):
    """``LayerNorm(x + Dropout(LP + beta^2 HP))`` along the sequence axis of ``[B, L, D]``."""

    def __init__(self, length: int, dim: int, c: int, dropout: float) -> None:
        super().__init__()
        self.keep = c // 2 + 1
        self.sqrt_beta = nn.Parameter(torch.randn(dim))  # the official N(0, 1) init
        self.dropout = Dropout(dropout)
        self.norm = nn.LayerNorm(dim, eps=1e-12)
        self.register_buffer("low", low_pass_matrix(length, self.keep), persistent=False)

    def low_pass(self, x: torch.Tensor) -> torch.Tensor:
        """The ``keep`` lowest rfft bins of ``x`` along dim 1, back in the time domain."""
        return torch.einsum("ts,bsd->btd", self.low.to(x.dtype), x)

    def filter(self, x: torch.Tensor) -> torch.Tensor:
        low = self.low_pass(x)
        return low + self.sqrt_beta.square() * (x - low)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x + self.dropout(self.filter(x)))


class Attention(nn.Module):
    """Post-LN multi-head self-attention with an additive mask (the official layout)."""

    def __init__(self, cfg: BSARecConfig) -> None:
        super().__init__()
        d = cfg.dim
        self.n_heads, self.head_dim = cfg.n_heads, d // cfg.n_heads
        self.query, self.key, self.value = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.out = nn.Linear(d, d)
        self.attn_dropout = Dropout(cfg.attn_dropout)
        self.dropout = Dropout(cfg.dropout)
        self.norm = nn.LayerNorm(d, eps=1e-12)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        return x.view(b, n, self.n_heads, self.head_dim).transpose(1, 2)  # [B, H, n, hd]

    def forward(self, x: torch.Tensor, bias: torch.Tensor, last_only: bool = False):
        """``bias`` ``[B, 1, L, L]`` additive; with ``last_only`` only the last query."""
        xq = x[:, -1:] if last_only else x
        q, k, v = self._heads(self.query(xq)), self._heads(self.key(x)), self._heads(self.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
        scores = scores + (bias[:, :, -1:] if last_only else bias)
        probs = self.attn_dropout(torch.softmax(scores, dim=-1))
        ctx = (probs @ v).transpose(1, 2).reshape(xq.shape)
        return self.norm(xq + self.dropout(self.out(ctx)))


class _Block(nn.Module):
    def __init__(self, cfg: BSARecConfig) -> None:
        super().__init__()
        d, inner = cfg.dim, cfg.ffn_dim or 4 * cfg.dim
        self.alpha = cfg.alpha
        self.frequency = FrequencyLayer(cfg.max_len, d, cfg.c, cfg.dropout)
        self.attention = Attention(cfg)
        self.fc1 = nn.Linear(d, inner)
        self.fc2 = nn.Linear(inner, d)
        self.ffn_norm = nn.LayerNorm(d, eps=1e-12)
        self.dropout = Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, bias: torch.Tensor, last_only: bool = False):
        dsp = self.frequency(x)
        if last_only:  # both paths and the FFN are read only at the last position
            dsp = dsp[:, -1:]
        x = self.alpha * dsp + (1 - self.alpha) * self.attention(x, bias, last_only)
        return self.ffn_norm(x + self.dropout(self.fc2(F.gelu(self.fc1(x)))))


def attention_bias(items: torch.Tensor) -> torch.Tensor:
    """Additive mask ``[B, 1, L, L]``: 0 where the key is a real item at or before the query,
    ``MASKED`` elsewhere (the official ``get_attention_mask``)."""
    length = items.shape[1]
    causal = torch.ones(length, length, dtype=torch.bool, device=items.device).tril()
    allowed = causal[None] & items.ne(0)[:, None, :]
    return (~allowed).to(torch.float32)[:, None] * MASKED


class BSARecEncoder(WindowEncoder):
    """BSARec's blocks over the window (:class:`WindowEncoder`); the attention half masks
    PAD keys and future positions (:func:`attention_bias`)."""

    def __init__(self, config: BSARecConfig, n_items: int) -> None:
        super().__init__(config, n_items, _Block)

    def run_blocks(self, x: torch.Tensor, items: torch.Tensor, last_only: bool) -> torch.Tensor:
        bias = attention_bias(items).to(x.dtype)
        for i, block in enumerate(self.blocks):
            x = block(x, bias, last_only and i == len(self.blocks) - 1)
        return x


class BSARec(FMLPRec):
    """BSARec recommender (see the module docstring for the paper and deviations); trained on
    FMLP-Rec's every-prefix samples."""

    name = "bsarec"
    config_cls = BSARecConfig
    encoder_cls = BSARecEncoder
    causal = False
    empty_prefix = True
