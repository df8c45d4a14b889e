"""Ranking metrics as pure functions over the 0-based rank of each target.

Every evaluation target has exactly one relevant item (the next item), so each metric is a
per-target array and the averaging policy is decided separately (:func:`mean_ci`):

* ``rank`` is the 0-based position of the target in the ranked catalogue (0 = top). A target
  the seen-item filter removed is given a rank ``>= n_items`` (always a miss).
* ``HR@k`` (hit rate) = ``rank < k``. With a single relevant item ``Recall@k`` equals ``HR@k``;
  both names are reported.
* ``NDCG@k`` = ``1 / log2(rank + 2)`` if ``rank < k`` else 0 (the ideal DCG is 1).
* ``MRR`` = ``1 / (rank + 1)``, not truncated at any k. A filtered target still contributes
  ``1 / (n_items + 1)``, which is below the contribution of any rankable item.
* ``COV@k`` (catalogue coverage) is a property of the set of top-k lists, not of one target.

No torch import: these functions are shared by factorization and neural models.
"""

from __future__ import annotations

import math

import numpy as np

from seqrec.errors import ConfigError

Z95 = 1.959963984540054  # two-sided 95% quantile of the standard normal


def _ranks(ranks: np.ndarray) -> np.ndarray:
    ranks = np.asarray(ranks)
    if ranks.ndim != 1:
        raise ConfigError(f"ranks must be a 1-D array, got shape {ranks.shape}")
    return ranks


def _check_k(k: int) -> int:
    if int(k) != k or k < 1:
        raise ConfigError(f"k must be a positive integer, got {k!r}")
    return int(k)


def hit_rate(ranks: np.ndarray, k: int) -> np.ndarray:
    """Per-target HR@k (= Recall@k for one relevant item): 1.0 if ``rank < k`` else 0.0."""
    return (_ranks(ranks) < _check_k(k)).astype(np.float64)


recall = hit_rate


def ndcg(ranks: np.ndarray, k: int) -> np.ndarray:
    """Per-target NDCG@k for one relevant item: ``1 / log2(rank + 2)`` if ``rank < k``."""
    r = _ranks(ranks).astype(np.float64)
    hit = r < _check_k(k)
    out = np.zeros(len(r), np.float64)
    out[hit] = 1.0 / np.log2(r[hit] + 2.0)
    return out


def mrr(ranks: np.ndarray) -> np.ndarray:
    """Per-target reciprocal rank ``1 / (rank + 1)`` (full, not truncated)."""
    return 1.0 / (_ranks(ranks).astype(np.float64) + 1.0)


def coverage(topk_items: np.ndarray, n_items: int, k: int) -> float:
    """Fraction of the catalogue (ids ``1..n_items``) present in at least one top-``k`` list.

    Args:
        topk_items: int ``[T, K]`` recommended ids per target, best first, ``K >= k``. Entries
            equal to 0 (PAD, used where fewer than K items were rankable) are ignored.
        n_items: catalogue size.
        k: list length to consider (the first ``k`` columns).
    """
    k = _check_k(k)
    topk_items = np.asarray(topk_items)
    if topk_items.ndim != 2 or topk_items.shape[1] < k:
        raise ConfigError(f"topk_items must be [T, K] with K >= {k}, got {topk_items.shape}")
    if n_items < 1:
        raise ConfigError(f"n_items must be >= 1, got {n_items}")
    seen = np.zeros(n_items + 1, bool)
    seen[topk_items[:, :k].ravel()] = True
    seen[0] = False
    return float(np.count_nonzero(seen)) / n_items


def group_means(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Mean of ``values`` within each distinct group (groups in sorted order)."""
    _, inverse, counts = np.unique(groups, return_inverse=True, return_counts=True)
    return np.bincount(inverse, weights=values, minlength=len(counts)) / counts


def mean_ci(values: np.ndarray, groups: np.ndarray | None = None) -> tuple[float, float, float]:
    """Mean and normal-approximation 95% confidence interval ``mean ± 1.96·sd/sqrt(n)``.

    Args:
        values: per-target metric values ``[T]``.
        groups: optional ``[T]`` group ids (users). When given, values are first averaged per
            group and the mean and CI are taken over groups (per-user averaging); otherwise over
            targets (per-interaction averaging).

    Returns:
        ``(mean, lo, hi)``. With a single unit the interval collapses to the mean.
    """
    values = np.asarray(values, dtype=np.float64)
    if len(values) == 0:
        raise ConfigError("cannot average an empty set of targets")
    if groups is not None:
        groups = np.asarray(groups)
        if len(groups) != len(values):
            raise ConfigError(f"groups has {len(groups)} entries, values has {len(values)}")
        values = group_means(values, groups)
    n = len(values)
    mean = float(values.mean())
    sd = float(values.std(ddof=1)) if n > 1 else 0.0
    half = Z95 * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def metric_names(ks: tuple[int, ...], coverage_k: bool = True) -> list[str]:
    """Names reported for ``ks``, in table order."""
    names: list[str] = []
    for k in ks:
        names += [f"HR@{k}", f"Recall@{k}", f"NDCG@{k}"]
    names.append("MRR")
    if coverage_k:
        names += [f"COV@{k}" for k in ks]
    return names


def summarize(
    ranks: np.ndarray,
    ks: tuple[int, ...],
    groups: np.ndarray | None = None,
) -> tuple[dict[str, float], dict[str, tuple[float, float]]]:
    """HR/Recall/NDCG@k and MRR of ``ranks`` with 95% CIs (see :func:`mean_ci` for ``groups``).

    Coverage is not computed here: it needs the top-k lists, not the ranks.
    """
    per_target: dict[str, np.ndarray] = {}
    for k in ks:
        hr = hit_rate(ranks, k)
        per_target[f"HR@{k}"] = hr
        per_target[f"Recall@{k}"] = hr
        per_target[f"NDCG@{k}"] = ndcg(ranks, k)
    per_target["MRR"] = mrr(ranks)
    metrics: dict[str, float] = {}
    ci95: dict[str, tuple[float, float]] = {}
    for name, vals in per_target.items():
        mean, lo, hi = mean_ci(vals, groups)
        metrics[name] = mean
        ci95[name] = (lo, hi)
    return metrics, ci95
