"""Next-item losses shared by every neural model (plain functions over hidden states).

All functions take ``hidden [B, L, D]``, ``targets [B, L]`` (0 = no target at that position)
and the prediction layer ``weight [I + 1, D]`` (row 0 = PAD) with an optional ``bias [I + 1]``,
and return the mean loss over valid (non-PAD) positions only.

* :func:`bce_loss` — the SASRec paper's binary cross-entropy with one sampled negative per
  position (Kang & McAuley, ICDM 2018).
* :func:`full_ce_loss` — softmax cross-entropy over the whole catalogue ("SASRec+", Klenitskiy &
  Vasilev, RecSys 2023), computed on valid positions only and chunk by chunk with a custom
  backward, so ``[B, L, I]`` logits never exist at once.
* :func:`sampled_softmax_loss` — softmax over the positive and ``N`` negatives shared by the
  batch, with optional log-Q correction (Yi et al., RecSys 2019).
* :func:`gbce_loss` — generalized BCE with calibrated negatives (Petrov & Macdonald, RecSys 2023).

:func:`next_item_loss` picks one by a config's ``loss``.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from seqrec.errors import DataError


def _valid(hidden: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Hidden states ``[N, D]`` and targets ``[N]`` of the valid positions."""
    valid = targets > 0
    if not bool(valid.any()):
        raise DataError("the batch has no valid (non-PAD) training position")
    return hidden[valid], targets[valid]


def bce_loss(
    hidden: torch.Tensor,
    targets: torch.Tensor,
    negatives: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """Paper BCE: ``softplus(-r_pos) + softplus(r_neg)`` averaged over valid positions.

    Args:
        negatives: ``[B, L]`` one negative per position (never PAD, never the positive).
    """
    valid = targets > 0
    if not bool(valid.any()):
        raise DataError("the batch has no valid (non-PAD) training position")
    h, pos, neg = hidden[valid], targets[valid], negatives[valid]  # [N, D], [N], [N]
    pos_logit = (h * weight[pos]).sum(-1)
    neg_logit = (h * weight[neg]).sum(-1)
    if bias is not None:
        pos_logit = pos_logit + bias[pos]
        neg_logit = neg_logit + bias[neg]
    return (F.softplus(-pos_logit) + F.softplus(neg_logit)).mean()


class _ChunkedSoftmaxCE(torch.autograd.Function):
    """Sum over rows of ``logsumexp(z) - ((1 - e) z[target] + e mean(z[1:]))`` with
    ``z = h W^T + b``, PAD column excluded, ``e`` the label smoothing.

    The forward pass loops over row chunks, keeping only ``[chunk, I]`` logits alive, and
    computes the gradients right there, so the backward pass only scales the stored
    ``[N, D]`` / ``[I, D]`` gradients: three matmuls and one ``exp`` per logit instead of
    recomputing the logits.

    Every pass over a chunk's ``[rows, I + 1]`` logits costs about as much as a small product
    on CPU, so only the passes the softmax needs touch them: the bias add, the max, the
    shifted ``exp``, the row sums, the bias gradient's column sums and the two gradient
    products read the unnormalised ``E = exp(z - max)``. The rest is done on ``[rows, D]`` or
    ``[I, D]`` tensors, by linearity of the gradient ``G = E / s - (1 - e) onehot(t) - e / I``
    (``s`` the row sums, ``e / I`` on the real items only):

    * ``G W = (E W) / s - (1 - e) W[t] - e mean(W[1:])``;
    * ``G^T h = E^T (h / s) - (1 - e) onehot(t)^T h - (e / I) 1[1:] sum(h)``;
    * the smoothed target's mean logit is ``h . mean(W[1:]) + mean(b[1:])``.

    With ``mm_dtype`` (bfloat16) the three matmuls take their inputs in that type (``h``, the
    weights and ``E`` are rounded to it; products accumulate in float32 inside the kernel)
    while the softmax, the loss, the one-hot and smoothing terms and the gradient sums stay
    float32. Training step times of both paths: ``benchmarks/bench_precision.py``.
    """

    @staticmethod
    def forward(ctx, h, weight, bias, targets, chunk, mm_dtype=None, smoothing=0.0):
        # h [N, D], weight [I+1, D]
        need_h, need_w, need_b = ctx.needs_input_grad[:3]
        grad_h = torch.empty_like(h) if need_h else None
        grad_w = torch.zeros_like(weight) if need_w else None
        grad_b = torch.zeros_like(bias) if (bias is not None and need_b) else None
        need_grads = grad_h is not None or grad_w is not None or grad_b is not None
        hit = 1.0 - smoothing  # the target's share of the smoothed label
        n_items = weight.shape[0] - 1
        total = h.new_zeros(())
        # One reused [chunk, I+1] buffer: a fresh multi-MB tensor per chunk costs page faults
        # comparable to the matmul itself.
        buf = h.new_empty((min(chunk, h.shape[0]), weight.shape[0]))
        low = mm_dtype is not None and mm_dtype != h.dtype
        h_mm, w_mm = (h.to(mm_dtype), weight.to(mm_dtype)) if low else (h, weight)
        wt = w_mm.T
        if smoothing:
            w_mean = weight[1:].mean(0)  # [D]: the mean logit is h . w_mean + b_mean
            b_mean = 0.0 if bias is None else bias[1:].mean()
        for start in range(0, h.shape[0], chunk):
            hc = h[start : start + chunk]
            hc_mm = h_mm[start : start + chunk]
            t = targets[start : start + chunk]
            logits = buf[: hc.shape[0]]
            if low:  # no mixed-dtype out= matmul on CPU: the product is copied up to float32
                logits.copy_(torch.mm(hc_mm, wt))
            else:
                torch.mm(hc_mm, wt, out=logits)
            if bias is not None:
                logits += bias
            logits[:, 0] = float("-inf")  # PAD is never a candidate
            rows = torch.arange(len(t), device=h.device)
            top = logits.amax(dim=1, keepdim=True)
            target_logit = logits[rows, t]
            if smoothing:
                target_logit = hit * target_logit + smoothing * (hc @ w_mean + b_mean)
            e = logits.sub_(top).exp_()  # one exp per logit; column 0 -> 0
            norm = e.sum(dim=1, keepdim=True)
            total += (norm.log().add_(top).squeeze(1) - target_logit).sum()
            if not need_grads:
                continue
            inv = norm.reciprocal_()  # [rows, 1]: the softmax is e * inv
            if grad_b is not None:
                grad_b.addmv_(e.T, inv.squeeze(1))
            e_mm = e.to(mm_dtype) if low else e
            if grad_h is not None:
                gh = grad_h[start : start + chunk]
                if low:
                    gh.copy_(torch.mm(e_mm, w_mm))
                else:
                    torch.mm(e_mm, w_mm, out=gh)
                gh.mul_(inv).sub_(weight[t], alpha=hit)
                if smoothing:
                    gh.sub_(w_mean, alpha=smoothing)
            if grad_w is not None:
                h_scaled = hc * inv
                if low:
                    grad_w += torch.mm(e_mm.T, h_scaled.to(mm_dtype))
                else:
                    grad_w.addmm_(e.T, h_scaled)
        # the one-hot and uniform parts of grad_w and grad_b, once for all rows
        uniform = smoothing / n_items  # each real item's share of the smoothed label
        if grad_w is not None:
            grad_w.index_add_(0, targets, h, alpha=-hit)
            if smoothing:
                grad_w[1:] -= uniform * h.sum(0)
        if grad_b is not None:
            grad_b.index_add_(0, targets, torch.full_like(targets, -hit, dtype=grad_b.dtype))
            if smoothing:
                grad_b[1:] -= uniform * h.shape[0]
        ctx.grads = (grad_h, grad_w, grad_b)
        return total

    @staticmethod
    def backward(ctx, grad_out):
        grad_h, grad_w, grad_b = ctx.grads
        ctx.grads = None
        scale = lambda g: None if g is None else g * grad_out  # noqa: E731
        return scale(grad_h), scale(grad_w), scale(grad_b), None, None, None, None


CPU_CHUNK_LOGITS = 1 << 20
"""Logits per chunk of the full cross-entropy on CPU (4 MiB in float32): whole ``[256, I]``
chunks of a catalogue of 10K+ items spill out of the cache between the logit product, the
softmax and the two gradient products (``benchmarks/bench_ce_chunk.py``)."""


def full_ce_loss(
    hidden: torch.Tensor,
    targets: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    chunk_size: int = 256,
    max_chunk_logits: int | None = None,
    mm_dtype: torch.dtype | None = None,
    label_smoothing: float = 0.0,
) -> torch.Tensor:
    """Full-softmax cross-entropy over items ``1..I`` on valid positions, in row chunks.

    ``label_smoothing`` ``e`` trains against ``(1 - e)`` on the target plus ``e / I`` on every
    item (``torch.nn.functional.cross_entropy``'s definition over the ``I`` real items; PAD
    gets nothing).

    Peak extra memory is ``chunk x (I + 1)`` logits with
    ``chunk = min(chunk_size, max_chunk_logits // (I + 1))`` (at least 1), so large catalogues
    get smaller chunks automatically. ``max_chunk_logits`` defaults to ``CPU_CHUNK_LOGITS`` on
    CPU, where a chunk's logits should stay in the cache while its softmax and gradient
    products read them again, and ``1 << 24`` elsewhere. ``mm_dtype=torch.bfloat16`` runs the
    logit and gradient matmuls in bfloat16 (softmax and sums in float32; see
    :class:`_ChunkedSoftmaxCE`).
    """
    h, t = _valid(hidden, targets)
    if h.dtype != weight.dtype:  # an autocast forward hands over bfloat16 states
        h = h.to(weight.dtype)
    if max_chunk_logits is None:
        max_chunk_logits = CPU_CHUNK_LOGITS if h.device.type == "cpu" else 1 << 24
    chunk = max(1, min(int(chunk_size), max_chunk_logits // weight.shape[0]))
    smoothing = float(label_smoothing)
    return _ChunkedSoftmaxCE.apply(h, weight, bias, t, chunk, mm_dtype, smoothing) / h.shape[0]


def sampled_softmax_loss(
    hidden: torch.Tensor,
    targets: torch.Tensor,
    negatives: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    neg_logq: torch.Tensor | None = None,
) -> torch.Tensor:
    """Softmax over ``[positive, N shared negatives]`` per valid position.

    Args:
        negatives: ``[N]`` item ids shared by every position of the batch; a negative equal to
            the position's positive is masked out.
        neg_logq: optional ``[N]`` log sampling probabilities; subtracted from the negative
            logits (log-Q correction) so popularity sampling estimates the full softmax.
    """
    h, t = _valid(hidden, targets)
    pos = (h * weight[t]).sum(-1, keepdim=True)  # [P, 1]
    neg = h @ weight[negatives].T  # [P, N]
    if bias is not None:
        pos = pos + bias[t][:, None]
        neg = neg + bias[negatives][None, :]
    if neg_logq is not None:
        neg = neg - neg_logq[None, :]
    neg = neg.masked_fill(negatives[None, :] == t[:, None], float("-inf"))
    logits = torch.cat([pos, neg], dim=1)
    return -torch.log_softmax(logits, dim=1)[:, 0].mean()


def gbce_beta(n_negatives: int, n_items: int, t: float) -> float:
    """gSASRec's positive-score exponent ``beta = alpha (t (1 - 1/alpha) + 1/alpha)`` with
    sampling rate ``alpha = n_negatives / (n_items - 1)``."""
    alpha = n_negatives / max(n_items - 1, 1)
    return alpha * (t * (1.0 - 1.0 / alpha) + 1.0 / alpha)


def gbce_loss(
    hidden: torch.Tensor,
    targets: torch.Tensor,
    negatives: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    t: float = 0.75,
) -> torch.Tensor:
    """gBCE: ``-log sigma(s+)^beta - sum_j log(1 - sigma(s-_j))`` averaged over valid positions.

    Args:
        negatives: ``[B, K]`` negatives per sequence, shared by its positions (absent from
            that user's history, so never a positive of that sequence).
        t: calibration parameter in ``[0, 1]``; ``t = 0`` is plain BCE, ``t = 1`` fully
            calibrates the sampled-negative probabilities.
    """
    n_items = weight.shape[0] - 1
    beta = gbce_beta(negatives.shape[1], n_items, t)
    valid = targets > 0
    if not bool(valid.any()):
        raise DataError("the batch has no valid (non-PAD) training position")
    pos = (hidden * weight[targets]).sum(-1)  # [B, L]
    neg = torch.einsum("bld,bkd->blk", hidden, weight[negatives])  # [B, L, K]
    if bias is not None:
        pos = pos + bias[targets]
        neg = neg + bias[negatives][:, None, :]
    # log sigma(x)^beta = -beta * softplus(-x); log(1 - sigma(x)) = -softplus(x)
    per_pos = beta * F.softplus(-pos) + F.softplus(neg).sum(-1)
    return per_pos[valid].mean()


def next_item_loss(
    cfg: Any,
    hidden: torch.Tensor,
    targets: torch.Tensor,
    data: dict,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    device: torch.device,
    ce_chunk: int,
) -> torch.Tensor:
    """The loss training config ``cfg``'s ``loss`` names ('ce', 'bce', 'gbce' or 'sampled_softmax') of hidden states
    ``[B, L, D]`` against ``targets [B, L]`` with the negatives in ``data``
    (:func:`seqrec.training.negatives.negatives_for_loss`)."""
    if cfg.loss == "ce":
        return full_ce_loss(
            hidden,
            targets,
            weight,
            bias,
            ce_chunk,
            mm_dtype=torch.bfloat16 if cfg.precision == "bf16" else None,
            label_smoothing=cfg.label_smoothing,
        )
    negs = data["negatives"].to(device)
    if cfg.loss == "bce":
        return bce_loss(hidden, targets, negs, weight, bias)
    if cfg.loss == "gbce":
        return gbce_loss(hidden, targets, negs, weight, bias, cfg.gbce_t)
    logq = data.get("neg_logq")
    return sampled_softmax_loss(
        hidden, targets, negs, weight, bias, None if logq is None else logq.to(device)
    )
