"""Full ranking of one chunk of targets: seen-item filter, target ranks and top-k lists.

Everything here works on one score chunk ``[B, n_items + 1]`` (column 0 = PAD = ``-inf``) so
that users x items is never materialized for all targets at once.

Policies (recorded with every result):

* **Seen-item filter.** ``history``: every item of the history given to the model is set to
  ``-inf``; ``window``: only the last ``window`` items of that history (LRURec's behaviour with
  ``window = max_len``: the model cannot know older items); ``none``: nothing is filtered.
  A target that appears in the filtered part of its own history is filtered too and counts as
  a miss (standard practice: a filtered item can never be recommended). Its rank is
  ``n_items``, the worst possible, whatever the tie policy.
* **Ties.** ``pessimistic`` (default): rank = number of items scoring strictly higher + number
  of *other* items scoring equal, so a constant model gets no credit. ``optimistic``: rank =
  number of items scoring strictly higher (an upper bound on the metrics). Pessimistic is the
  honest choice; optimistic exists to show how much a model gains from ties.
* **NaN scores** are treated as ``-inf`` (never recommended) with a warning counting them.

No torch import: factorization models are evaluated without it.
"""

from __future__ import annotations

import logging
import sys

import numpy as np

from seqrec.data.sequences import Sequences
from seqrec.errors import ConfigError, DataError

log = logging.getLogger(__name__)

SEEN_FILTERS = ("history", "window", "none")
TIES = ("pessimistic", "optimistic")


def check_seen_filter(seen_filter: str, window: int | None) -> None:
    """Raise :class:`ConfigError` for an unknown filter mode or a missing/bad window."""
    if seen_filter not in SEEN_FILTERS:
        raise ConfigError(
            f"unknown seen_filter {seen_filter!r}; allowed: {', '.join(SEEN_FILTERS)}"
        )
    if seen_filter == "window":
        if window is None:
            raise ConfigError("seen_filter='window' needs window (e.g. the model's max_len)")
        if int(window) != window or window < 1:
            raise ConfigError(f"window must be a positive integer, got {window!r}")


def check_ties(ties: str) -> None:
    if ties not in TIES:
        raise ConfigError(f"unknown ties policy {ties!r}; allowed: {', '.join(TIES)}")


def seen_positions(
    histories: Sequences, seen_filter: str, window: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, items)`` index arrays of the score cells the seen filter sets to ``-inf``."""
    check_seen_filter(seen_filter, window)
    if seen_filter == "none":
        empty = np.zeros(0, np.int64)
        return empty, empty
    rows = histories.row_ids
    items = histories.items
    if seen_filter == "window":
        # position of each stored item inside its row; keep the last `window` of each row
        pos = np.arange(len(items), dtype=np.int64) - histories.offsets[rows]
        keep = pos >= histories.lengths[rows] - int(window)
        rows, items = rows[keep], items[keep]
    return rows, items


def apply_seen_filter(
    scores: np.ndarray, histories: Sequences, seen_filter: str, window: int | None = None
) -> np.ndarray:
    """Set the filtered items of each history row to ``-inf`` in place; returns ``scores``."""
    if len(histories) != scores.shape[0]:
        raise DataError(f"{len(histories)} histories for {scores.shape[0]} score rows")
    rows, items = seen_positions(histories, seen_filter, window)
    scores[rows, items] = -np.inf
    return scores


def target_ranks(scores: np.ndarray, items: np.ndarray, ties: str = "pessimistic") -> np.ndarray:
    """0-based rank of ``items[b]`` in row ``b`` of ``scores`` ``[B, n_items + 1]``.

    A target scored ``-inf`` (filtered, or never rankable) gets rank ``n_items``.
    """
    check_ties(ties)
    n_items = scores.shape[1] - 1
    items = np.asarray(items, dtype=np.int64)
    target = scores[np.arange(len(items)), items][:, None]  # [B, 1]
    ranks = np.count_nonzero(scores > target, axis=1).astype(np.int64)
    if ties == "pessimistic":
        ranks += np.count_nonzero(scores == target, axis=1) - 1  # other items tied with it
    ranks[np.isneginf(target[:, 0])] = n_items
    return ranks


def topk_items(scores: np.ndarray, k: int) -> np.ndarray:
    """``[B, k]`` item ids with the highest scores, best first; 0 where fewer than k are finite.

    Among equal scores at the cut the choice is arbitrary (but deterministic); lists are sorted
    by descending score, then ascending id.
    """
    n_cols = scores.shape[1]
    k = min(int(k), n_cols - 1)
    torch = sys.modules.get("torch")  # used when already loaded; never imported for this
    if torch is not None:  # torch.topk is much faster than np.argpartition on wide blocks
        vals_t, part_t = torch.topk(
            torch.from_numpy(np.ascontiguousarray(scores)), k, dim=1, sorted=False
        )
        vals, part = vals_t.numpy(), part_t.numpy()
    else:  # the k largest sit in the last k columns after partitioning
        part = np.argpartition(scores, n_cols - k, axis=1)[:, n_cols - k :]
        vals = np.take_along_axis(scores, part, axis=1)
    order = np.lexsort((part, -vals), axis=1)  # descending score, then ascending id
    top = np.take_along_axis(part, order, axis=1)
    top[~np.isfinite(np.take_along_axis(vals, order, axis=1))] = 0
    return top.astype(np.int64)


def check_scores(scores: np.ndarray, n_rows: int, n_cols: int) -> np.ndarray:
    """Validate a score chunk's shape; column 0 (PAD) and NaN become ``-inf`` (NaN warns).

    The filter later writes into the chunk, so a non-float, read-only or borrowed (view) array
    is copied first: a model returning a view of its own cache is never corrupted.
    """
    scores = np.asarray(scores)
    if scores.shape != (n_rows, n_cols):
        raise DataError(f"scores must have shape ({n_rows}, {n_cols}), got {scores.shape}")
    if scores.dtype.kind != "f":
        scores = scores.astype(np.float32)
    elif not (scores.flags.owndata and scores.flags.writeable):
        scores = scores.copy()
    scores[:, 0] = -np.inf  # PAD is never an item, whatever the model put there
    if scores.size and np.isnan(np.min(scores)):  # min propagates NaN: one cheap pass
        nan = np.isnan(scores)
        log.warning("%d NaN score(s) treated as -inf (never recommended)", int(nan.sum()))
        scores[nan] = -np.inf
    return scores


def rank_chunk(
    scores: np.ndarray,
    histories: Sequences,
    items: np.ndarray,
    seen_filter: str = "history",
    window: int | None = None,
    ties: str = "pessimistic",
    top_k: int = 0,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Filter, rank and (if ``top_k > 0``) take the top-k of one chunk.

    Args:
        scores: ``[B, n_items + 1]`` scores; modified in place by the filter.
        histories: the ``B`` histories the model was given (same rows as ``scores``).
        items: ``[B]`` target item ids.
        seen_filter / window / ties: see the module docstring.
        top_k: length of the top-k lists to return (0: none).

    Returns:
        ``(ranks [B], topk [B, top_k] or None)``.
    """
    apply_seen_filter(scores, histories, seen_filter, window)
    ranks = target_ranks(scores, items, ties)
    top = topk_items(scores, top_k) if top_k > 0 else None
    return ranks, top
