"""LRURec: linear recurrent units for sequential recommendation.

Yue, Wang, He, Zeng, McAuley, Wang, "Linear Recurrent Units for Sequential Recommendation",
WSDM 2024 (``papers/lrurec.md``); the LRU itself follows Orvieto et al. 2023, "Resurrecting
Recurrent Neural Networks for Long Sequences".

The displayed equations are missing from our copy of the paper; the model below is rebuilt
from its prose and from Orvieto et al.:

* **Embedding** (Sec. 3.4): ``x = LayerNorm(Dropout(E[item]))``, ``E`` ``[I + 1, D]``. The paper
  only says LayerNorm follows the embedding lookup; the dropout before it is the authors' code
  (``embed_dropout_at="before_norm"``). ``"after_norm"`` gives ``Dropout(LayerNorm(E[item]))``,
  the order of seqrec's earliest LRURec runs, kept so that they resume
  (``docs/decisions/lrurec-recipe.md``).
* **LRU layer** (Eq. 5): ``N = 2 D`` complex states ("we double the size of H in Lambda")::

      lam   = exp(-exp(nu_log) + i exp(theta_log))                  [N]
      u_t   = exp(gamma_log) * (B x_t + b)                          B: C^{N x D}, b: C^N
      h_t   = lam * h_{t-1} + u_t                                   (parallel scan)
      y_t   = LayerNorm(Dropout(Re(C h_t) + c) + x_t)               C: C^{D x N}, c: R^D

  ``D = I`` (the residual ``+ x_t``), ``LayerNorm`` on the LRU output ("LRUNorm").
  ``nu_log, theta_log`` are initialised on the ring ``r in [r_min, r_max] = [0.8, 0.99]``
  (radius uniform in area, phase uniform in ``[0, 2 pi]``, Orvieto et al. Lemma 3.2) and
  ``gamma_log = log sqrt(1 - |lam|^2)``.
* **PFFN sublayer**: ``z = LayerNorm(y + Dropout(W2 Dropout(GELU(W1 y + b1)) + b2))`` with
  ``W1`` ``[4D, D]`` (post-norm residual sublayer, as in the paper's ``SubLayer``).
* **Blocks**: ``n_blocks = 2`` LRU + PFFN blocks.
* **Prediction**: ``score = h E^T + b_o`` with the shared embedding ``E``.
* **Initialisation**: every weight except LayerNorms and ``nu/theta/gamma`` is drawn from a
  normal with std 0.02 truncated at two standard deviations (BERT4Rec's scheme, which the paper
  cites), real and imaginary parts independently.

Choices where the paper is silent (deviations, all documented):

* Left padding: PAD positions get a zero LRU input (``u_t = 0``, the bias included), so the
  state stays exactly zero until the first real item; the paper pads too but does not say how
  the bias is treated at PAD positions.
* Complex parameters are stored as separate real and imaginary tensors (``B_re``, ``B_im``...)
  and the complex matrix products are done in real arithmetic; the recurrence itself runs in
  complex64 (complex128 for a float64 model).
* ``Re(C h + c)``: the imaginary part of the output bias would be discarded, so ``c`` is real.
* Label smoothing (deviation by default): the cross-entropy trains against ``0.9`` on the
  target plus ``0.1 / I`` on every item (``label_smoothing=0.1``); ``label_smoothing=0`` is the
  paper's loss. It validated higher on every seed of both datasets the defaults are chosen on
  (``docs/decisions/label-smoothing.md``).
* Training loss, optimiser, early stopping: the shared trainer (cross-entropy over all items,
  AdamW, early stopping on the validation metric of ``TorchRecommender``); the paper selects
  on validation Recall@10. As in the authors' code, weight decay skips biases and LayerNorms
  (``decay_biases_and_norms=False``) but applies to ``nu/theta/gamma``; their AdamW
  ``eps = 1e-9`` is not copied (PyTorch's 1e-8).
* Training data: the authors' loader cuts long histories into windows
  (``sliding_window_size = 1``). ``train_windows="sliding"`` does this so that every transition
  is a target exactly once; theirs cuts only histories of at least ``2 * max_len`` items and
  drops the oldest remainder. ``"sliding"`` is the default: it validates better than
  ``"last"``, the most recent ``max_len`` transitions per user, where histories are longer than
  ``max_len`` (``docs/decisions/sliding-training-windows.md``). Their gradient clipping
  (norm 5) is ``grad_clip=5``.

**Training computation.** The math above, computed with less memory traffic (values and
gradients equal to the plain modules' up to the order of float operations; a test checks
them): each LRU layer is one autograd node run over cache-sized chunks of batch rows (input
product, blocked scan of :mod:`seqrec.models.lru_scan` in place, output product, dropout,
residual and LayerNorm per chunk; backward likewise, with the reverse-time scan), ``gamma``
folded into the input weights; the PFFN (with its residual and LayerNorm) is one autograd node
over row chunks that keeps its pre-activation with dropped elements stored where GELU and its
derivative are 0, so backward needs neither the product again nor a mask; dropout scales are
folded into the following weights. Dropout masks are one
byte an element, drawn by :func:`keep_mask` (keep probability ``1 - p`` to ``2**-33``, a random
stream of its own, seeded by torch's generator). In training on a batch with PAD the PFFN
computes the real positions only (its outputs at PAD positions are never read: the next LRU
zeroes its PAD inputs and no target sits there; the masks are drawn for every position first, so
the stream is the same). A batch with PAD runs in groups of rows of similar length, each on
the window cut to its longest row (:attr:`LRUEncoder.length_groups`; exact, since PAD inputs
keep the state at zero; the dropout masks are drawn per group, another random stream than the
whole window's). ``encode_last`` computes the last block's last state without a scan
(:meth:`LRULayer.last_state`) and runs its output and PFFN at the last position only. Why and
how much: ``docs/decisions/lrurec-training-speed.md``.

**Incremental inference.** :meth:`LRUEncoder.step` advances a cached per-layer state by one
item in ``O(D^2)`` per layer, independent of the history length, with no re-encoding; it equals
the full encoding (tests check every prefix). ``LRURec.stream`` / ``LRURec.update`` expose this
as a streaming top-k API (see their docstrings).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from seqrec.data.batching import SequenceBatch, left_pad
from seqrec.data.sequences import Sequences
from seqrec.errors import ConfigError, DataError
from seqrec.models.base import Recommendation
from seqrec.models.encoder import SequenceEncoder
from seqrec.models.layers import Dropout, tracing
from seqrec.models.lru_scan import block_powers, blocked_scan, lru_parallel_scan
from seqrec.models.neural_config import NeuralConfig, check_choice, check_positive, check_range
from seqrec.models.torch_recommender import TorchRecommender, _Threads

INIT_STD = 0.02
EMBED_DROPOUT_AT = ("before_norm", "after_norm")


@dataclass(frozen=True)
class LRURecConfig(NeuralConfig):
    """LRURec hyperparameters (training defaults: ``train_defaults``).

    Defaults follow the paper (d = 64, 2 blocks, AdamW lr 1e-3 with weight decay 1e-2 and
    PyTorch's default betas, cross-entropy over all items, batch 128) except the patience, set
    to the best recipe measured (``docs/reproduce/defaults.md``): ``patience=30``, and label
    smoothing 0.1 (``docs/decisions/label-smoothing.md``; ``label_smoothing=0`` is the paper's
    loss); with sliding windows the paper's 1e-3 validated above 3e-3
    (``docs/decisions/lrurec-recipe.md``). Use
    ``max_len=200`` and ``dropout=0.2`` on ML-1M, ``max_len=50`` and ``dropout=0.6`` on the
    Amazon data.
    """

    dim: int = 64
    """Embedding / hidden size d (the LRU has 2 d complex states)."""
    n_blocks: int = 2
    """Number of LRU + PFFN blocks."""
    dropout: float = 0.2
    """Dropout after the embedding, on the LRU output and inside/after the PFFN."""
    r_min: float = 0.8
    """Smallest initial |lambda| (ring initialisation)."""
    r_max: float = 0.99
    """Largest initial |lambda| (ring initialisation)."""
    train_defaults = {
        "lr": 1e-3,  # the paper's; validated above 3e-3 with sliding windows
        "patience": 30,
        "train_windows": "sliding",  # every transition once per epoch: the authors' loader
        "weight_decay": 1e-2,  # the paper's grid {0, 1e-6, 1e-4, 1e-2}; its README uses 1e-2
        "betas": (0.9, 0.999),  # PyTorch's defaults, as in the authors' code
        "decay_biases_and_norms": False,  # the authors' code decays neither biases nor LayerNorms
        "label_smoothing": 0.1,  # validated above the one-hot target (0 = the paper's loss)
    }
    embed_dropout_at: str = "before_norm"
    """``before_norm``: ``LayerNorm(Dropout(E x))`` (the authors' code); ``after_norm``:
    ``Dropout(LayerNorm(E x))`` (the value older runs trained with)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive(self, "dim", "n_blocks")
        check_range(self, "dropout", 0.0, 0.99)
        check_choice(self, "embed_dropout_at", EMBED_DROPOUT_AT)
        if not 0.0 < self.r_min <= self.r_max < 1.0:
            raise ConfigError(
                f"need 0 < r_min <= r_max < 1, got r_min={self.r_min}, r_max={self.r_max}"
            )


def _trunc_normal_(t: torch.Tensor) -> None:
    nn.init.trunc_normal_(t, mean=0.0, std=INIT_STD, a=-2 * INIT_STD, b=2 * INIT_STD)


def keep_threshold(p: float) -> tuple[int, int]:
    """The threshold ``T = round(p * 2**32)`` of :func:`keep_mask` as ``(T >> 24, T % 2**24)``:
    an element is dropped iff a uniform 32-bit draw is below ``T``, so it is kept with
    probability ``1 - T / 2**32``, within ``2**-33`` of ``1 - p``."""
    t = round(p * 2**32)
    return t >> 24, t & 0xFFFFFF


MASK_CHUNK = 1 << 18
"""Elements per chunk of :func:`keep_mask`'s CPU draw (its work stays in the CPU cache)."""


def keep_mask(
    shape: tuple[int, ...], p: float, device: torch.device | str = "cpu", dropped: bool = False
) -> torch.Tensor:
    """A dropout keep mask (uint8 0/1, ``shape``): each element kept independently with
    probability ``1 - p`` (to ``2**-33``; see :func:`keep_threshold`). ``dropped``: the same
    draw as 1 where an element is dropped (``1 - keep``).

    On CPU each element's 32-bit draw is read lazily: its first byte decides unless it equals
    the threshold's first byte (probability 1/256), and only those elements draw 24 more bits.
    The bytes come from numpy's PCG64 (eight a 64-bit word) seeded by one 63-bit draw from
    torch's default generator, so ``torch.manual_seed`` fixes the masks. This costs a fraction
    of one ``uniform_`` float an element from torch's CPU generator (what ``layers.Dropout``
    draws). Elsewhere: ``uniform_`` floats compared with ``p`` (to ``2**-24``).
    """
    if torch.device(device).type != "cpu":
        return torch.rand(shape, device=device).ge_(p).to(torch.uint8)
    n = math.prod(shape)
    hi, lo = keep_threshold(p)
    seed = int(torch.empty((), dtype=torch.int64).random_())
    bits = np.random.PCG64(seed)
    out = np.empty(n, dtype=np.bool_)
    ties = np.empty(min(n, MASK_CHUNK), dtype=np.bool_)  # reused: no allocation per chunk
    first = np.less if dropped else np.greater
    for start in range(0, n, MASK_CHUNK):
        k = min(MASK_CHUNK, n - start)
        byte = bits.random_raw((k + 7) // 8).view(np.uint8)[:k]
        chunk = out[start : start + k]
        first(byte, hi, out=chunk)
        tie = np.flatnonzero(np.equal(byte, hi, out=ties[:k]))
        if tie.size:  # the next 24 bits decide: dropped iff below the threshold's last 24
            low = bits.random_raw(tie.size) & 0xFFFFFF
            chunk[tie] = (low < lo) if dropped else (low >= lo)
    return torch.from_numpy(out).view(torch.uint8).view(shape)


class _ByteMaskDropout(torch.autograd.Function):
    """Inverted dropout with a one-byte mask from :func:`keep_mask`, kept for backward."""

    @staticmethod
    def forward(ctx, x, p):  # noqa: D401
        keep = keep_mask(x.shape, p, x.device)
        ctx.save_for_backward(keep)
        ctx.scale = 1.0 / (1.0 - p)
        return torch.mul(x, keep).mul_(ctx.scale)

    @staticmethod
    def backward(ctx, grad):
        (keep,) = ctx.saved_tensors
        return torch.mul(grad, keep).mul_(ctx.scale), None


def _dropout(module: Dropout, x: torch.Tensor) -> torch.Tensor:
    """``module(x)`` (inverted dropout), in training through :class:`_ByteMaskDropout`."""
    p = module.p
    if not module.training or p == 0.0 or p >= 1.0:
        return module(x)
    return _ByteMaskDropout.apply(x, p)


def _drop_p(module: Dropout) -> float:
    """The drop probability a fused node applies for ``module``: 0 outside training."""
    return module.p if module.training else 0.0


def _fuse(x: torch.Tensor, dropout: Dropout) -> bool:
    """Whether a layer runs as its fused node: on CPU, in training or in inference mode
    (exports trace the plain operations), with a drop probability below 1."""
    training = dropout.training
    return (
        x.device.type == "cpu"
        and (training or torch.is_inference_mode_enabled())
        and not (training and dropout.p >= 1.0)
    )


class _Norm:
    """The residual sum and post-LayerNorm a fused node ends with, chunk by chunk: keeps the
    LayerNorm input and its row statistics for backward (what ``nn.LayerNorm`` keeps)."""

    def __init__(self, like: torch.Tensor, save: bool) -> None:
        n, d = like.shape
        self.pre = like.new_empty(n, d) if save else None
        self.mean = like.new_empty(n, 1) if save else None
        self.rstd = like.new_empty(n, 1) if save else None

    def forward(self, rows: slice, pre: torch.Tensor, weight, bias, eps: float) -> torch.Tensor:
        out, mean, rstd = torch.native_layer_norm(pre, pre.shape[-1:], weight, bias, eps)
        if self.pre is not None:
            self.pre[rows] = pre
            self.mean[rows], self.rstd[rows] = mean, rstd
        return out


def _norm_backward(grad, pre, mean, rstd, weight, bias, grads):
    """LayerNorm backward of one chunk; adds the weight and bias gradients to ``grads``."""
    g_pre, g_w, g_b = torch.ops.aten.native_layer_norm_backward(
        grad, pre, pre.shape[-1:], mean, rstd, weight, bias, [True, True, True]
    )
    grads[0] += g_w
    grads[1] += g_b
    return g_pre


FUSED_ROWS = 1024
"""Rows per chunk of the fused PFFN: a ``[rows, 4D]`` float block stays in the CPU cache."""


DROPPED = -1e30
"""What a dropped PFFN pre-activation is stored as: GELU and its derivative are exactly 0
there (``erf`` saturates to -1 and ``exp(-x^2 / 2)`` to 0), for float32 and float64."""


class _FusedPFFN(torch.autograd.Function):
    """``LayerNorm(x + Dropout(W2 Dropout(GELU(W1 x + b1)) + b2))`` over chunks of
    ``FUSED_ROWS`` rows.

    Each chunk's ``[rows, 4D]`` activation is made, dropped and consumed while it is in the
    cache. The inner dropout is applied to the pre-activation ``a = W1 x + b1``: a dropped
    element is stored as ``DROPPED`` (``a - 1e30``), where GELU and its derivative are exactly
    0, so ``a`` alone (float ``[..., 4D]``) is kept for backward in place of the modules'
    three ``[..., 4D]`` float tensors (GELU input, mask, dropout output), and backward needs
    no mask: it recomputes GELU from the stored ``a`` per chunk. Both masks are drawn whole
    before the loop (inner, then outer: the modules' order); the dropout scales
    ``1 / (1 - p)`` are folded into ``W2`` and ``b2``, so the output mask costs one multiply
    by its 0/1 bytes. Without gradients (inference) only one chunk's ``a`` exists at a time.
    """

    @staticmethod
    def forward(ctx, x, w1, b1, w2, b2, p, ln_w, ln_b, eps, real=None):  # noqa: D401
        x2 = x.reshape(-1, x.shape[-1])
        total, width = x2.shape[0], w1.shape[0]
        if real is not None:  # only these rows of x are read next (the others are PAD)
            x2 = x2.index_select(0, real)
        n = x2.shape[0]
        scale = 1.0 / (1.0 - p)
        save = any(ctx.needs_input_grad)
        norm = _Norm(x2, save)
        a = x2.new_empty(n if save else min(n, FUSED_ROWS), width)
        out = x.new_empty(n, w2.shape[0])
        drop = keep_out = None
        if p > 0.0:  # drawn for every row, as without ``real``: the same random stream
            drop = keep_mask((total, width), p, x.device, dropped=True)
            keep_out = keep_mask((total, w2.shape[0]), p, x.device)
            if real is not None:
                drop, keep_out = drop.index_select(0, real), keep_out.index_select(0, real)
        w2s, b2s = w2 * scale**2, b2 * scale  # both dropout scales (1 without dropout)
        for start in range(0, n, FUSED_ROWS):
            rows = slice(start, start + FUSED_ROWS)
            x_c = x2[rows]
            a_c = a[rows] if save else a[: x_c.shape[0]]
            torch.addmm(b1, x_c, w1.t(), out=a_c)
            if drop is not None:
                a_c.add_(drop[rows], alpha=DROPPED)
            act = nn.functional.gelu(a_c)
            pre = torch.addmm(b2s, act, w2s.t())
            if keep_out is not None:
                pre.mul_(keep_out[rows])
            out[rows] = norm.forward(rows, pre.add_(x_c), ln_w, ln_b, eps)
        ctx.save_for_backward(
            x2, w1, w2, a if save else None, keep_out, norm.pre, norm.mean, norm.rstd, ln_w, ln_b
        )
        ctx.scale, ctx.real, ctx.shape = scale, real, x.shape
        if real is not None:  # PAD rows 0
            out = out.new_zeros(total, w2.shape[0]).index_copy_(0, real, out)
        return out.view(*x.shape[:-1], w2.shape[0])

    @staticmethod
    def backward(ctx, grad):
        x2, w1, w2, a, keep_out, pre, mean, rstd, ln_w, ln_b = ctx.saved_tensors
        scale, real = ctx.scale, ctx.real
        g2 = grad.reshape(-1, grad.shape[-1])
        if real is not None:
            g2 = g2.index_select(0, real)
        ln_grads = [torch.zeros_like(ln_w), torch.zeros_like(ln_b)]
        # per chunk: g = grad * keep_out (the output dropout's mask; its scale is in w2s and
        # alpha); dL/d(act) = g W2 scale^2 (0 where dropped: GELU's derivative is 0 at
        # DROPPED); dL/dW2 = scale^2 g^T act
        w2s = w2 * scale**2
        grad_x = torch.empty_like(x2)
        grad_w1, grad_w2 = torch.zeros_like(w1), torch.zeros_like(w2)
        grad_b1, grad_b2 = w1.new_zeros(w1.shape[0]), w2.new_zeros(w2.shape[0])
        for start in range(0, x2.shape[0], FUSED_ROWS):
            rows = slice(start, start + FUSED_ROWS)
            a_c = a[rows]
            g_pre = _norm_backward(
                g2[rows], pre[rows], mean[rows], rstd[rows], ln_w, ln_b, ln_grads
            )
            g_c = g_pre if keep_out is None else torch.mul(g_pre, keep_out[rows])
            grad_b2 += g_c.sum(0)
            act = nn.functional.gelu(a_c)
            grad_w2.addmm_(g_c.t(), act, alpha=scale**2)
            grad_a = torch.ops.aten.gelu_backward(torch.mm(g_c, w2s), a_c)
            grad_w1.addmm_(grad_a.t(), x2[rows])
            grad_b1 += grad_a.sum(0)
            torch.addmm(g_pre, grad_a, w1, out=grad_x[rows])  # + the residual's gradient
        grad_b2.mul_(scale)
        if real is not None:
            grad_x = grad_x.new_zeros(math.prod(ctx.shape[:-1]), x2.shape[-1]).index_copy_(
                0, real, grad_x
            )
        return (
            grad_x.view(ctx.shape),
            grad_w1,
            grad_b1,
            grad_w2,
            grad_b2,
            None,
            *ln_grads,
            None,
            None,
        )


LRU_ROWS = 4096
"""Positions per chunk of the fused LRU layer (whole rows of the batch, at least one)."""


class _FusedLRU(torch.autograd.Function):
    """The LRU of one layer with its output dropout, residual and LayerNorm,
    ``LayerNorm(Dropout(Re(C h) + c) + x)`` with ``h = scan(m * (W x + b))``, over chunks of
    whole batch rows (about ``LRU_ROWS`` positions each).

    ``W`` ``[2N, D]`` and ``b`` ``[2N]`` hold the (gamma-scaled) input weights with real and
    imaginary rows interleaved, so ``W x + b`` viewed as complex is ``u``; ``cw`` ``[D, 2N]``
    is ``[C_re, -C_im]`` interleaved, so ``cw`` applied to the real view of ``h`` is
    ``Re(C h)``. Each chunk's input product, scan, output product and dropout run while the
    chunk is in the CPU cache; the states are written once, into the tensor returned (and
    kept for backward, with ``x`` and the one-byte mask). Backward runs per chunk too: the
    output product's gradient, the reverse-time scan with ``conj(lam)`` (as in
    :mod:`seqrec.models.lru_scan`), the input product's gradients. ``m`` ``[B, L, 1]`` (or
    None): 1 at real items, 0 at PAD. ``p``: the output dropout (its scale folded into
    ``cw`` and ``c``).
    """

    @staticmethod
    def forward(ctx, x, m, w, b, lam, cw, c, p, ln_w, ln_b, eps):  # noqa: D401
        x = x.contiguous()
        batch, length, d = x.shape
        n2 = w.shape[0]
        rows = max(1, LRU_ROWS // max(length, 1))
        scale = 1.0 / (1.0 - p)
        keep = keep_mask((batch, length, d), p, x.device) if p > 0.0 else None
        cws, cs = (cw * scale, c * scale) if keep is not None else (cw, c)
        h = x.new_empty(batch, length, n2)  # the states, real and imaginary parts interleaved
        y = x.new_empty(batch, length, d)
        norm = _Norm(x.view(-1, d), any(ctx.needs_input_grad))
        powers = block_powers(lam, length)
        for start in range(0, batch, rows):
            sl = slice(start, start + rows)
            h_c = h[sl]
            z = torch.addmm(b, x[sl].view(-1, d), w.t(), out=h_c.view(-1, n2))
            if m is not None:
                h_c.mul_(m[sl])
            u = torch.view_as_complex(h_c.view(*h_c.shape[:2], n2 // 2, 2))
            blocked_scan(u, lam, out=u, powers=powers)
            pre = torch.addmm(cs, z, cws.t())
            if keep is not None:
                pre.mul_(keep[sl].view(-1, d))
            pre.add_(x[sl].view(-1, d))
            rows_t = slice(start * length, start * length + pre.shape[0])
            y[sl] = norm.forward(rows_t, pre, ln_w, ln_b, eps).view(-1, length, d)
        ctx.save_for_backward(x, m, w, lam, cw, h, keep, norm.pre, norm.mean, norm.rstd, ln_w, ln_b)
        ctx.scale = scale
        ctx.mark_non_differentiable(h)
        ctx.set_materialize_grads(False)  # no zero-filled gradient for the states
        return y, torch.view_as_complex(h.view(batch, length, n2 // 2, 2))

    @staticmethod
    def backward(ctx, grad_y, _grad_h):
        x, m, w, lam, cw, h, keep, pre, mean, rstd, ln_w, ln_b = ctx.saved_tensors
        if grad_y is None:
            return (None,) * 11
        ln_grads = [torch.zeros_like(ln_w), torch.zeros_like(ln_b)]
        batch, length, d = x.shape
        n2 = w.shape[0]
        rows = max(1, LRU_ROWS // max(length, 1))
        scale = ctx.scale
        # dL/d(pre-dropout output) = grad_y * keep * scale: the mask per chunk, the scale in
        # cws and alpha
        grad_y = grad_y.contiguous()
        cws = cw * scale if keep is not None else cw
        lam_c = lam.conj().resolve_conj()
        powers = block_powers(lam_c, length)
        grad_x = torch.empty_like(x)
        grad_w, grad_cw = torch.zeros_like(w), torch.zeros_like(cw)
        grad_b, grad_c = w.new_zeros(n2), cw.new_zeros(d)
        grad_lam = torch.zeros_like(lam)
        buf = x.new_empty(min(rows, batch) * length, n2)
        for start in range(0, batch, rows):
            sl = slice(start, start + rows)
            rows_t = slice(start * length, min(start + rows, batch) * length)
            g_pre = _norm_backward(
                grad_y[sl].view(-1, d),
                pre[rows_t],
                mean[rows_t],
                rstd[rows_t],
                ln_w,
                ln_b,
                ln_grads,
            )
            g_c = g_pre if keep is None else torch.mul(g_pre, keep[sl].view(-1, d))
            grad_c += g_c.sum(0)
            h_c = h[sl].view(-1, n2)
            grad_cw.addmm_(g_c.t(), h_c, alpha=scale)
            gz = torch.mm(g_c, cws, out=buf[: g_c.shape[0]])  # dL/d(real view of h)
            shape = (g_c.shape[0] // length, length, n2 // 2, 2)
            G = torch.view_as_complex(gz.view(shape))
            blocked_scan(G, lam_c, reverse=True, out=G, powers=powers)  # dL/du
            hc = torch.view_as_complex(h_c.view(shape))
            grad_lam += (G[:, 1:] * hc[:, :-1].conj()).sum((0, 1))
            if m is not None:
                gz.view(shape[0], length, n2).mul_(m[sl])
            grad_w.addmm_(gz.t(), x[sl].view(-1, d))
            grad_b += gz.sum(0)
            torch.addmm(g_pre, gz, w, out=grad_x[sl].view(-1, d))  # + the residual's gradient
        grad_c.mul_(scale)
        return grad_x, None, grad_w, grad_b, grad_lam, grad_cw, grad_c, None, *ln_grads, None


LAST_STATE_PRODUCT_FROM = 1.15
"""``LRULayer.last_state`` sums over time first from ``L >= 1.15 (D + 1)``: the crossover
with the scan measured by ``benchmarks/bench_lru_last_state.py`` is near ``L = D + 1``."""


@dataclass
class LRUState:
    """Cached recurrent state of a batch of users.

    Attributes:
        h: per layer, complex ``[B, N]`` LRU state after the last item.
        last: ``[B, D]`` encoder output at the last item (what ``score`` is applied to).
        length: int64 ``[B]`` number of items consumed so far.
    """

    h: list[torch.Tensor]
    last: torch.Tensor
    length: torch.Tensor

    def select(self, rows: torch.Tensor) -> LRUState:
        return LRUState([h[rows] for h in self.h], self.last[rows], self.length[rows])


class LRULayer(nn.Module):
    """One linear recurrent unit with its output LayerNorm (``LRUNorm``)."""

    def __init__(self, d: int, r_min: float, r_max: float, dropout: float) -> None:
        super().__init__()
        n = 2 * d
        self.d, self.n = d, n
        u1, u2 = torch.rand(n), torch.rand(n)
        # |lam|^2 uniform on [r_min^2, r_max^2] (uniform in area on the ring), phase in [0, 2pi]
        nu = -0.5 * torch.log(u1 * (r_max**2 - r_min**2) + r_min**2)
        theta = (2 * math.pi * u2).clamp_min(1e-4)
        self.nu_log = nn.Parameter(torch.log(nu))
        self.theta_log = nn.Parameter(torch.log(theta))
        self.gamma_log = nn.Parameter(0.5 * torch.log1p(-torch.exp(-2 * nu)))
        self.B_re = nn.Parameter(torch.empty(n, d))
        self.B_im = nn.Parameter(torch.empty(n, d))
        self.b_re = nn.Parameter(torch.empty(n))
        self.b_im = nn.Parameter(torch.empty(n))
        self.C_re = nn.Parameter(torch.empty(d, n))
        self.C_im = nn.Parameter(torch.empty(d, n))
        self.c = nn.Parameter(torch.empty(d))
        for p in (self.B_re, self.B_im, self.b_re, self.b_im, self.C_re, self.C_im, self.c):
            _trunc_normal_(p)
        self.dropout = Dropout(dropout)
        self.norm = nn.LayerNorm(d)

    def lam(self) -> torch.Tensor:
        """Complex diagonal ``[N]``, ``|lam| = exp(-exp(nu_log)) < 1``."""
        return torch.exp(torch.complex(-torch.exp(self.nu_log), torch.exp(self.theta_log)))

    def inputs(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """``gamma * (B x + b)`` as complex ``[..., N]``, zero at PAD positions."""
        # one real matmul with interleaved (re, im) rows, viewed as complex without a copy;
        # gamma is folded into the (small) weights and PAD rows of x are zeroed before the
        # product, so autograd keeps only the masked [..., D] input, not [..., 2N] products
        gamma = torch.exp(self.gamma_log).repeat_interleave(2)
        w = torch.stack((self.B_re, self.B_im), dim=1).reshape(2 * self.n, self.d)
        b = torch.stack((self.b_re, self.b_im), dim=1).reshape(2 * self.n) * gamma
        w = w * gamma.unsqueeze(-1)
        if mask is None:
            z = nn.functional.linear(x, w, b)
        else:
            # the bias as one more input column, 1 at real items and 0 at PAD
            m = mask.unsqueeze(-1).to(x.dtype)
            z = nn.functional.linear(torch.cat((x * m, m), dim=-1), torch.cat((w, b[:, None]), 1))
        return torch.view_as_complex(z.reshape(*z.shape[:-1], self.n, 2))

    def last_state(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """The state after the last position, ``h_L = sum_t lam**(L-1-t) u_t``, complex ``[B, N]``
        (the same as the scan's last state, in another order of the additions), for
        left-padded ``x`` ``[B, L, D]``.

        The sum over time is taken before the input product, so no ``[B, L, N]`` states are
        built: ``s_n = sum_t lam_n**(L-1-t) [x_t, 1]`` for every state ``n`` is one
        ``[2N, L] x [L, B (D + 1)]`` product (the real and imaginary parts of the powers,
        the bias as a column that is 1 at real items and 0 at PAD), then
        ``h_n = gamma_n [B_n, b_n] . s_n``, a ``D + 1``-long complex dot per state. The
        product has as many FLOPs as the input product it replaces and writes ``D + 1`` values
        per state and row instead of ``L``: on CPU it is faster once ``L`` is well above
        ``D + 1`` and slower below (``benchmarks/bench_lru_last_state.py``); shorter rows run
        the scan of the input product instead.
        """
        batch, length, d = x.shape
        if length < LAST_STATE_PRODUCT_FROM * (d + 1):
            return lru_parallel_scan(self.inputs(x, mask), self.lam())[:, -1]
        n = self.n
        gamma = torch.exp(self.gamma_log).unsqueeze(-1)
        w_re = torch.cat((self.B_re, self.b_re.unsqueeze(-1)), 1) * gamma  # [N, D + 1]
        w_im = torch.cat((self.B_im, self.b_im.unsqueeze(-1)), 1) * gamma
        m = x.new_ones(batch, length, 1) if mask is None else mask.unsqueeze(-1).to(x.dtype)
        xa = torch.cat((x * m, m), dim=-1).transpose(0, 1).reshape(length, -1)  # [L, B (D+1)]
        # lam**k = exp(k log lam) in double precision: k runs to L - 1 and the phase with it
        log_lam = torch.complex(
            -torch.exp(self.nu_log.double()), torch.exp(self.theta_log.double())
        )
        k = torch.arange(length - 1, -1, -1, dtype=torch.float64, device=x.device)
        pw = torch.exp(k.unsqueeze(-1) * log_lam)
        pw = torch.cat((pw.real, pw.imag), dim=1).t().to(x.dtype)  # [2N, L]
        s = (pw @ xa).view(2, n, batch, d + 1)  # the real and imaginary parts of s
        # h_re = w_re . s_re - w_im . s_im, h_im = w_im . s_re + w_re . s_im (per state)
        h = torch.bmm(s[0], torch.stack((w_re, w_im), -1))  # [N, B, 2]
        h = h.baddbmm(s[1], torch.stack((-w_im, w_re), -1))
        return torch.view_as_complex(h.transpose(0, 1).contiguous())

    def output(self, h: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """``LayerNorm(Dropout(Re(C h) + c) + x)`` for states ``h`` ``[..., N]``."""
        # Re(C h) = C_re h_re - C_im h_im: one matmul over the interleaved (re, im) view of h
        w = torch.stack((self.C_re, -self.C_im), dim=-1).reshape(self.d, 2 * self.n)
        hr = torch.view_as_real(h).reshape(*h.shape[:-1], 2 * self.n)
        y = nn.functional.linear(hr, w, self.c)
        return self.norm(_dropout(self.dropout, y) + x)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``x`` ``[B, L, D]`` -> (outputs ``[B, L, D]``, states ``[B, L, N]``)."""
        if _fuse(x, self.dropout):
            # one autograd node over cache-sized chunks of rows (see _FusedLRU); exports
            # (traced, not in inference mode) see the plain operations
            return self._fused(x, mask)
        h = lru_parallel_scan(self.inputs(x, mask), self.lam())
        return self.output(h, x), h

    def _fused(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        gamma = torch.exp(self.gamma_log).repeat_interleave(2)
        w = torch.stack((self.B_re, self.B_im), dim=1).reshape(2 * self.n, self.d)
        b = torch.stack((self.b_re, self.b_im), dim=1).reshape(2 * self.n) * gamma
        w = w * gamma.unsqueeze(-1)
        cw = torch.stack((self.C_re, -self.C_im), dim=-1).reshape(self.d, 2 * self.n)
        m = None if mask is None or bool(mask.all()) else mask.unsqueeze(-1).to(x.dtype)
        cdtype = torch.complex128 if x.dtype == torch.float64 else torch.complex64
        p = _drop_p(self.dropout)
        ln = self.norm
        return _FusedLRU.apply(
            x, m, w, b, self.lam().to(cdtype), cw, self.c, p, ln.weight, ln.bias, ln.eps
        )


class PFFN(nn.Module):
    """Position-wise feed-forward sublayer with post-LayerNorm residual."""

    def __init__(self, d: int, dropout: float) -> None:
        super().__init__()
        self.w1 = nn.Linear(d, 4 * d)
        self.w2 = nn.Linear(4 * d, d)
        self.act = nn.GELU()
        self.dropout = Dropout(dropout)
        self.norm = nn.LayerNorm(d)
        for p in (self.w1.weight, self.w1.bias, self.w2.weight, self.w2.bias):
            _trunc_normal_(p)

    def forward(self, x: torch.Tensor, real: torch.Tensor | None = None) -> torch.Tensor:
        """``real``: the rows of ``x`` flattened to ``[-1, D]`` that are read next (the fused
        node computes only those, the others are 0, with the same dropout stream)."""
        if _fuse(x, self.dropout):
            # one autograd node, in cache-sized row chunks (see _FusedPFFN); exports (traced,
            # not in inference mode) see the plain modules; both dropouts are inside
            w1, w2 = self.w1, self.w2
            p = _drop_p(self.dropout)
            ln = self.norm
            return _FusedPFFN.apply(
                x, w1.weight, w1.bias, w2.weight, w2.bias, p, ln.weight, ln.bias, ln.eps, real
            )
        y = self.w2(self.dropout(self.act(self.w1(x))))
        return self.norm(x + _dropout(self.dropout, y))


def _real_rows(x: torch.Tensor, mask: torch.Tensor | None, training: bool):
    """In training on CPU, the real positions of a batch with PAD (flattened ``[B L]``): the
    PFFN's outputs at PAD positions are never read (the next LRU zeroes its PAD inputs, and no
    target sits there), so the fused PFFN computes only these rows; None otherwise."""
    if not training or x.device.type != "cpu" or mask is None or bool(mask.all()):
        return None
    if tracing():
        return None
    return mask.reshape(-1).nonzero().squeeze(1)


class LRUBlock(nn.Module):
    def __init__(self, d: int, r_min: float, r_max: float, dropout: float) -> None:
        super().__init__()
        self.lru = LRULayer(d, r_min, r_max, dropout)
        self.ffn = PFFN(d, dropout)


class LRUEncoder(SequenceEncoder):
    """The LRURec network: embedding, ``n_blocks`` LRU blocks, shared-embedding prediction.

    Reads ``dim``, ``n_blocks``, ``dropout``, ``r_min``, ``r_max`` from ``config``.
    """

    def __init__(self, config, n_items: int) -> None:
        super().__init__()
        if n_items < 1:
            raise DataError(f"n_items must be >= 1, got {n_items}")
        self.n_items = n_items
        d = config.dim
        self.embedding = nn.Embedding(n_items + 1, d)
        _trunc_normal_(self.embedding.weight)
        self.out_bias = nn.Parameter(torch.empty(n_items + 1))
        _trunc_normal_(self.out_bias)
        self.embed_norm = nn.LayerNorm(d)
        self.embed_dropout = Dropout(config.dropout)
        self.dropout_before_norm = config.embed_dropout_at == "before_norm"
        self.blocks = nn.ModuleList(
            LRUBlock(d, config.r_min, config.r_max, config.dropout) for _ in range(config.n_blocks)
        )

    # --- full (parallel) encoding ------------------------------------------------------
    def _embed(self, items: torch.Tensor) -> torch.Tensor:
        e = self.embedding(items)
        if self.dropout_before_norm:
            return self.embed_norm(_dropout(self.embed_dropout, e))
        return _dropout(self.embed_dropout, self.embed_norm(e))

    def encode(
        self, items: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Left-padded ``items`` ``[B, L]`` -> (hidden ``[B, L, D]``, per-layer states)."""
        x = self._embed(items)
        states = []
        real = _real_rows(x, mask, self.training)
        for block in self.blocks:
            x, h = block.lru(x, mask)
            x = block.ffn(x, real)
            states.append(h)
        return x, states

    length_groups = 4
    """Groups of rows of similar length a batch with PAD is cut into by :meth:`forward` (1:
    one group, cut only where every row is PAD)."""

    def forward(self, batch: SequenceBatch) -> torch.Tensor:  # [B, L, D]
        """Hidden states of left-padded ``items`` ``[B, L, D]`` (at PAD positions: nothing to
        read; 0 where a window was cut). The rows are sorted by how many positions they span
        (from their first real item to the end), cut into :attr:`length_groups` groups of equal
        size, and each group runs on the window cut to its longest row: exact, since PAD inputs
        keep every state at zero and the other layers are position-wise, up to the order of
        float additions; in training the dropout masks are drawn group by group (another random
        stream than the whole window's). Short histories in a long window (mostly PAD) gain the
        most."""
        items, mask = batch.items, batch.mask
        if tracing():  # a trace records one path for every batch: the whole window
            return self.encode(items, mask)[0]
        length = items.shape[1]
        first = torch.where(mask.any(1), mask.to(torch.int8).argmax(1), length)
        span = (length - first).clamp_(min=1)
        groups = 1 if bool(mask.all()) else min(self.length_groups, len(items))
        if groups <= 1:
            return self._cut(items, mask, int(span.max()) if len(items) else length)
        order = torch.argsort(span, stable=True)
        parts = [
            self._cut(items.index_select(0, idx), mask.index_select(0, idx), int(span[idx[-1]]))
            for idx in torch.tensor_split(order, groups)  # sorted: a group's longest is last
        ]
        return torch.cat(parts).index_select(0, torch.argsort(order))

    def _cut(self, items: torch.Tensor, mask: torch.Tensor, width: int) -> torch.Tensor:
        """:meth:`encode` on the last ``width`` positions, 0 before them: ``[B, L, D]``."""
        length = items.shape[1]
        if width >= length:
            return self.encode(items, mask)[0]
        out = self.encode(items[:, length - width :], mask[:, length - width :])[0]
        return F.pad(out, (0, 0, length - width, 0))

    def encode_last(self, batch: SequenceBatch) -> torch.Tensor:  # [B, D]
        """Output at the last position ``[B, D]``: the last block computes its LRU's last state
        only (:meth:`LRULayer.last_state`, no scan) and runs its output and PFFN on that
        position."""
        items, mask = batch.items, batch.mask
        if items.shape[1] == 0 or not bool(mask.any()):
            return self.forward(batch)[:, -1]
        return self._last(items, mask)[0]

    def _last(
        self, items: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """(output at the last position ``[B, D]``, every block's last state ``[B, N]``) of
        left-padded ``items`` with at least one real item: all-PAD columns skipped as in
        ``forward``, the last block's states before the last never built."""
        first = int(mask.any(0).float().argmax())
        items, mask = items[:, first:], mask[:, first:]
        x = self._embed(items)
        states = []
        for block in self.blocks[:-1]:
            x, h = block.lru(x, mask)
            states.append(h[:, -1])
            x = block.ffn(x)
        lru = self.blocks[-1].lru
        h = lru.last_state(x, mask)
        states.append(h)
        return self.blocks[-1].ffn(lru.output(h.unsqueeze(1), x[:, -1:]))[:, -1], states

    def output_embeddings(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        return self.embedding.weight, self.out_bias

    def no_decay_names(self) -> set[str]:
        # the LRU biases are stored as b_re/b_im/c (the complex Linear biases of the code)
        extra = {
            n
            for n, _ in self.named_parameters()
            if n == "out_bias" or n.rsplit(".", 1)[-1] in ("b_re", "b_im", "c")
        }
        return super().no_decay_names() | extra

    # --- recurrent (incremental) mode --------------------------------------------------
    def init_state(self, batch_size: int) -> LRUState:
        """The state of ``batch_size`` empty histories (all zeros)."""
        p = self.embedding.weight
        cdtype = torch.complex128 if p.dtype == torch.float64 else torch.complex64
        h = [torch.zeros(batch_size, b.lru.n, dtype=cdtype, device=p.device) for b in self.blocks]
        last = torch.zeros(batch_size, p.shape[1], dtype=p.dtype, device=p.device)
        return LRUState(h, last, torch.zeros(batch_size, dtype=torch.long, device=p.device))

    def prefill(self, items: torch.Tensor) -> LRUState:
        """State after left-padded histories ``items`` ``[B, L]`` (one parallel pass; the last
        block's state by :meth:`LRULayer.last_state`)."""
        mask = items != 0
        if items.shape[1] == 0 or not bool(mask.any()):
            return self.init_state(items.shape[0])
        last, states = self._last(items, mask)
        length = mask.sum(1)
        last = last * (length > 0).unsqueeze(-1).to(last.dtype)
        return LRUState(states, last, length)

    def step(self, state: LRUState, item_ids: torch.Tensor) -> tuple[LRUState, torch.Tensor]:
        """Consume one new item per row (``0`` = no event for that row) in ``O(D^2)`` per layer.

        Returns the new state and the hidden output ``[B, D]`` at the new item (equal to
        ``forward`` at the last position of the extended history). Rows with item ``0`` keep
        their state and previous output. Call in ``eval()`` mode (dropout would apply).
        """
        if item_ids.dim() != 1 or item_ids.shape[0] != state.last.shape[0]:
            raise DataError(
                f"item_ids must be [B] with B = {state.last.shape[0]}, got {tuple(item_ids.shape)}"
            )
        active = item_ids != 0
        x = self._embed(item_ids)  # [B, D]
        new_h = []
        for block, h in zip(self.blocks, state.h, strict=True):
            h_next = block.lru.lam() * h + block.lru.inputs(x, None)
            h_next = torch.where(active.unsqueeze(-1), h_next, h)
            x = block.ffn(block.lru.output(h_next, x))
            new_h.append(h_next)
        last = torch.where(active.unsqueeze(-1), x, state.last)
        return LRUState(new_h, last, state.length + active.long()), last


@dataclass
class StreamState:
    """A user's streaming session with :class:`LRURec` (a mutable handle).

    Attributes:
        state: the cached recurrent state (batch of one user).
        seen: internal ids of every item consumed (for ``exclude_seen``).
        n_events: known items consumed so far.
        skipped_unknown: unknown raw ids skipped so far.
    """

    state: LRUState
    seen: set[int] = field(default_factory=set)
    n_events: int = 0
    skipped_unknown: int = 0


class LRURec(TorchRecommender):
    """LRURec (Yue et al., WSDM 2024) on the shared trainer; the network is :class:`LRUEncoder`.

    Besides ``recommend``, a fitted model serves event streams in O(1) per event::

        s = model.stream(["i1", "i2"])          # encode the known history once
        model.update(s, ["i3"], k=10)           # consume a new event, get the next top-10
        model.update(s, [], k=10)               # top-10 for the current state

    ``stream`` encodes the last ``max_len`` known items of the history with the parallel scan,
    so its first answer equals ``recommend`` on that history. ``update`` advances the cached
    per-layer states by ``LRUEncoder.step`` (no re-encoding) and mutates ``s`` in place. While
    the whole stream fits in ``max_len`` items, every answer equals ``recommend`` on the full
    history; beyond it the recurrence keeps the older items in its (decaying) state instead of
    truncating the window, which is what a recurrent model does and what ``recommend`` cannot.
    """

    name = "lrurec"
    config_cls = LRURecConfig
    encoder_cls = LRUEncoder

    def incremental(self, slide: str = "exact", stride: int = 0):
        """The live-session encoder: the per-layer recurrent states, exact within ``max_len``
        (:mod:`seqrec.models.kv_cache`).

        ``slide`` / ``stride``: what happens beyond ``max_len`` (see there)."""
        from seqrec.models.kv_cache import LRURecRecurrent, cached_encoder

        return cached_encoder(self, LRURecRecurrent, slide=slide, stride=stride)

    # --- streaming ---------------------------------------------------------------------
    def stream(self, history: Iterable[Any] = ()) -> StreamState:
        """Start a streaming session from a history of raw item ids (oldest first)."""
        enc = self._stream_encoder()
        ids, unknown = self.vocab.encode_known(list(history))
        seqs = Sequences.from_lists([ids], n_items=self.n_items)
        items, _ = left_pad(seqs, np.array([0]), min(max(len(ids), 1), self.config.max_len))
        with _Threads(self.run_config.num_threads), torch.inference_mode():
            state = enc.prefill(torch.from_numpy(items).to(self.device))
        return StreamState(state, set(ids.tolist()), len(ids), unknown)

    def update(
        self,
        session: StreamState,
        new_items: Iterable[Any] = (),
        k: int = 10,
        exclude_seen: bool = True,
    ) -> Recommendation:
        """Consume ``new_items`` (raw ids, in order) and return the next top-``k``.

        Each known item costs one ``LRUEncoder.step`` (O(d^2) per layer, independent of the
        history length); unknown ids are skipped and counted. ``session`` is updated in place.
        """
        if k < 1:
            raise DataError(f"k must be >= 1, got {k}")
        enc = self._stream_encoder()
        ids, unknown = self.vocab.encode_known(list(new_items))
        session.skipped_unknown += unknown
        with _Threads(self.run_config.num_threads), torch.inference_mode():
            for item in ids.tolist():
                session.state, _ = enc.step(session.state, torch.tensor([item], device=self.device))
            session.seen.update(ids.tolist())
            session.n_events += len(ids)
            if session.n_events == 0:
                scores = self.popularity.astype(np.float32).copy()
            else:
                scores = enc.score(session.state.last)[0].float().cpu().numpy()
        scores[0] = -np.inf
        if exclude_seen and session.seen:
            scores[np.fromiter(session.seen, dtype=np.int64)] = -np.inf
        k = min(k, self.n_items)
        top = np.argpartition(-scores, k - 1)[:k]
        order = top[np.argsort(-scores[top], kind="stable")]
        order = order[np.isfinite(scores[order])]
        return Recommendation(
            items=self.vocab.decode(order).tolist(),  # plain ints / strs, not numpy scalars
            scores=[float(v) for v in scores[order]],
            skipped_unknown=unknown,
            fallback="popularity" if session.n_events == 0 else None,
        )

    def _stream_encoder(self) -> LRUEncoder:
        self._check_fitted()
        if self.encoder is None or self.vocab is None:
            raise DataError("streaming needs a fitted model with an item vocabulary")
        self.encoder.eval()
        return self.encoder
