"""Vectorized negative sampling that never returns PAD or an item of the user's own history.

Membership is checked against a sorted array of ``row * (n_items + 1) + item`` keys (a CSR
matrix flattened into one searchable vector), and rejected draws are redrawn until none is left.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from seqrec.data.sequences import Sequences
from seqrec.errors import DataError

_MAX_ROUNDS = 64


class NegativeSampler:
    """Draws item ids absent from a training row.

    Args:
        train: the training sequences; row ``r``'s items are never drawn for row ``r``.
        popularity: optional ``[n_items + 1]`` weights; when given, :meth:`shared` draws items
            proportionally to them (for log-Q corrected sampled softmax).
    """

    def __init__(self, train: Sequences, popularity: np.ndarray | None = None) -> None:
        self.n_items = train.n_items
        self._stride = np.int64(train.n_items + 1)
        self._keys = np.unique(train.row_ids * self._stride + train.items)
        n_distinct = np.bincount(
            (self._keys // self._stride).astype(np.int64), minlength=len(train)
        )
        if len(train) and n_distinct.max() >= train.n_items:
            full = int(np.argmax(n_distinct))
            raise DataError(
                f"row {full} contains every item of the catalogue: no negative can be drawn"
            )
        self._cdf = None
        if popularity is not None:
            p = np.asarray(popularity, dtype=np.float64).copy()
            p[0] = 0.0
            if p.sum() <= 0:
                raise DataError("popularity weights must have a positive sum")
            self._prob = p / p.sum()
            self._cdf = np.cumsum(self._prob)

    def seen(self, rows: np.ndarray, items: np.ndarray) -> np.ndarray:
        """Boolean array: ``items[...]`` is in training row ``rows[...]`` (broadcast)."""
        keys = np.asarray(rows, np.int64) * self._stride + np.asarray(items, np.int64)
        pos = np.searchsorted(self._keys, keys)
        pos = np.minimum(pos, max(len(self._keys) - 1, 0))
        return self._keys[pos] == keys if len(self._keys) else np.zeros(keys.shape, bool)

    def per_row(
        self, rng: np.random.Generator, rows: np.ndarray, shape: tuple[int, ...]
    ) -> np.ndarray:
        """Uniform negatives ``[len(rows), *shape]``, each absent from its row's history."""
        rows = np.asarray(rows, np.int64)
        full_shape = (len(rows), *shape)
        row_b = np.broadcast_to(rows.reshape((-1,) + (1,) * len(shape)), full_shape)
        out = rng.integers(1, self.n_items + 1, size=full_shape)
        bad = self.seen(row_b, out)
        for _ in range(_MAX_ROUNDS):
            n_bad = int(bad.sum())
            if n_bad == 0:
                return out
            redraw = rng.integers(1, self.n_items + 1, size=n_bad)
            out[bad] = redraw
            still = self.seen(row_b[bad], redraw)
            bad[bad] = still
        # Rows with almost every item seen: exhaustive fallback, still exact.
        for idx in zip(*np.nonzero(bad), strict=True):
            r = row_b[idx]
            lo, hi = np.searchsorted(self._keys, [r * self._stride, (r + 1) * self._stride])
            free = np.setdiff1d(
                np.arange(1, self.n_items + 1), self._keys[lo:hi] - r * self._stride
            )
            out[idx] = rng.choice(free)
        return out

    def shared(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray | None]:
        """``n`` negatives shared by a whole batch and their log-probabilities (``None`` when
        uniform). Shared negatives may hit a positive; the loss masks those collisions."""
        if self._cdf is None:
            return rng.integers(1, self.n_items + 1, size=n), None
        items = np.searchsorted(self._cdf, rng.random(n) * self._cdf[-1], side="right")
        items = np.clip(items, 1, self.n_items)
        return items, np.log(self._prob[items])


def negatives_for_loss(
    sampler: NegativeSampler | None,
    cfg: Any,
    users: np.ndarray,
    rng: np.random.Generator,
    max_len: int,
) -> dict[str, Any]:
    """The negatives training config ``cfg``'s ``loss`` needs for a batch of ``users`` (training rows): none for
    'ce', ``[B, max_len]`` for 'bce', ``[B, n_negatives]`` for 'gbce', ``[n_negatives]`` shared
    by the batch (and their log-Q with popularity sampling) for 'sampled_softmax'."""
    import torch

    out: dict[str, Any] = {}
    if cfg.loss == "bce":
        out["negatives"] = torch.from_numpy(sampler.per_row(rng, users, (max_len,)))
    elif cfg.loss == "gbce":
        out["negatives"] = torch.from_numpy(sampler.per_row(rng, users, (cfg.n_negatives,)))
    elif cfg.loss == "sampled_softmax":
        negs, logq = sampler.shared(rng, cfg.n_negatives)
        out["negatives"] = torch.from_numpy(negs)
        if logq is not None:
            out["neg_logq"] = torch.from_numpy(logq.astype(np.float32))
    return out
