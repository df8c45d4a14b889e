"""Sampled ranking (1 positive + N negatives), only to compare with older papers.

Sampled metrics are known to disagree with full-ranking ones (Krichene & Rendle, "On Sampled
Metrics for Item Recommendation", KDD 2020), so seqrec makes them reproducible and visible:

* candidate sets are drawn **once**, from a seed, with :func:`draw_candidates`, and saved
  (:func:`save_candidates`, an ``.npz`` beside the result) so another run ranks exactly the
  same candidates (:func:`load_candidates`);
* the result's ``ranking`` field is ``"sampled-<N>-<uniform|popularity>"``, which every table
  and summary line prints.

Negatives are drawn without replacement, never equal the positive and (``exclude_history``,
the default and the usual practice) never appear in the user's history. Popularity sampling is
proportional to the given item counts (pass the *training* counts); weighted sampling without
replacement uses Efraimidis-Spirakis keys ``log(u) / w``, vectorized over a chunk of targets.
When ``exclude_history`` is set, a positive that is itself in the history is a miss, exactly as
in full ranking with the ``history`` filter.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from seqrec.data.sequences import Targets
from seqrec.errors import ConfigError, DataError
from seqrec.evaluation.metrics import summarize
from seqrec.evaluation.protocols import EvalResult, check_common, chunks, user_groups
from seqrec.evaluation.ranking import (
    apply_seen_filter,
    check_scores,
    check_ties,
    seen_positions,
    target_ranks,
)

STRATEGIES = ("uniform", "popularity")
_DRAW_CHUNK = 1024  # fixed so that the draw never depends on a caller's chunk size


@dataclass(frozen=True)
class SampledCandidates:
    """Negatives drawn once for a fixed set of targets.

    Attributes:
        rows: int64 ``[T]`` sequence row of each target (checked against the targets later).
        items: int64 ``[T]`` the positive of each target.
        negatives: int64 ``[T, N]`` negative item ids.
        n_items: catalogue size at draw time.
        strategy: ``uniform`` or ``popularity``.
        seed: seed of the draw.
        exclude_history: whether negatives exclude the user's history.
    """

    rows: np.ndarray
    items: np.ndarray
    negatives: np.ndarray
    n_items: int
    strategy: str
    seed: int
    exclude_history: bool

    @property
    def n_negatives(self) -> int:
        return int(self.negatives.shape[1])

    @property
    def label(self) -> str:
        """The ``ranking`` label of results computed on these candidates."""
        return f"sampled-{self.n_negatives}-{self.strategy}"

    def check_matches(self, targets: Targets) -> None:
        """Raise :class:`DataError` unless these candidates were drawn for ``targets``."""
        if (
            len(targets) != len(self.items)
            or targets.sequences.n_items != self.n_items
            or not np.array_equal(np.asarray(targets.rows), self.rows)
            or not np.array_equal(np.asarray(targets.items), self.items)
        ):
            raise DataError(
                "these candidate sets were drawn for different targets "
                f"({len(self.items)} targets, {self.n_items} items); draw them again"
            )


def draw_candidates(
    targets: Targets,
    n_negatives: int = 100,
    strategy: str = "uniform",
    popularity: np.ndarray | None = None,
    exclude_history: bool = True,
    seed: int = 0,
) -> SampledCandidates:
    """Draw ``n_negatives`` distinct negatives for every target, reproducibly from ``seed``.

    Args:
        targets: the targets to draw for.
        n_negatives: negatives per target (``N``).
        strategy: ``uniform`` or ``popularity`` (proportional to ``popularity``).
        popularity: ``[n_items + 1]`` item counts, required for ``popularity`` (use the
            training data's counts; items with count 0 are never drawn).
        exclude_history: negatives never appear in the target's history.
        seed: seed of the draw.

    Raises:
        ConfigError: a bad option. DataError: a target with fewer than ``N`` eligible items.
    """
    if strategy not in STRATEGIES:
        raise ConfigError(
            f"unknown sampling strategy {strategy!r}; allowed: {', '.join(STRATEGIES)}"
        )
    if int(n_negatives) != n_negatives or n_negatives < 1:
        raise ConfigError(f"n_negatives must be >= 1, got {n_negatives!r}")
    if len(targets) == 0:
        raise DataError("no targets to draw candidates for")
    n_items = targets.sequences.n_items
    N = int(n_negatives)
    if strategy == "popularity":
        if popularity is None:
            raise ConfigError("strategy='popularity' needs popularity (training item counts)")
        weights = np.asarray(popularity, dtype=np.float64)
        if (
            weights.shape != (n_items + 1,)
            or np.any(weights < 0)
            or not np.all(np.isfinite(weights))
        ):
            raise ConfigError(
                f"popularity must be {n_items + 1} finite non-negative counts, got shape {weights.shape}"
            )
        weights = weights.copy()
    else:
        weights = np.ones(n_items + 1, np.float64)
    weights[0] = 0.0  # PAD is never a candidate
    with np.errstate(divide="ignore"):
        inv_w = np.where(weights > 0, 1.0 / np.where(weights > 0, weights, 1.0), np.inf)
    rng = np.random.default_rng(seed)
    T = len(targets)
    negatives = np.empty((T, N), np.int64)
    items = np.asarray(targets.items, dtype=np.int64)
    for sl in chunks(T, _DRAW_CHUNK, False, "draw"):
        B = sl.stop - sl.start
        u = rng.random((B, n_items + 1))
        with np.errstate(divide="ignore", invalid="ignore"):
            keys = np.log(u) * inv_w[None, :]  # log(u)/w; -inf where w == 0
        keys[np.isnan(keys)] = -np.inf  # log(0) * inf
        keys[np.arange(B), items[sl]] = -np.inf
        if exclude_history:
            r, i = seen_positions(targets.histories(sl), "history")
            keys[r, i] = -np.inf
        eligible = np.count_nonzero(np.isfinite(keys), axis=1)
        if eligible.min() < N:
            bad = int(np.argmin(eligible)) + sl.start
            raise DataError(
                f"target {bad} has only {int(eligible.min())} eligible negatives, "
                f"n_negatives={N} requested"
            )
        part = np.argpartition(-keys, N - 1, axis=1)[:, :N]
        part.sort(axis=1)
        negatives[sl] = part
    return SampledCandidates(
        rows=np.asarray(targets.rows, dtype=np.int64).copy(),
        items=items.copy(),
        negatives=negatives,
        n_items=int(n_items),
        strategy=strategy,
        seed=int(seed),
        exclude_history=bool(exclude_history),
    )


def save_candidates(candidates: SampledCandidates, path: str | Path) -> Path:
    """Write the candidate sets to ``path`` (``.npz``, no pickle)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        path,
        rows=candidates.rows,
        items=candidates.items,
        negatives=candidates.negatives,
        n_items=np.int64(candidates.n_items),
        strategy=np.str_(candidates.strategy),
        seed=np.int64(candidates.seed),
        exclude_history=np.bool_(candidates.exclude_history),
    )
    return path if path.suffix == ".npz" else path.with_name(path.name + ".npz")


def load_candidates(path: str | Path) -> SampledCandidates:
    """Read candidate sets written by :func:`save_candidates`."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"candidate file {path} does not exist")
    try:
        with np.load(path, allow_pickle=False) as z:
            return SampledCandidates(
                rows=z["rows"],
                items=z["items"],
                negatives=z["negatives"],
                n_items=int(z["n_items"]),
                strategy=str(z["strategy"]),
                seed=int(z["seed"]),
                exclude_history=bool(z["exclude_history"]),
            )
    except (KeyError, ValueError, OSError) as exc:
        raise DataError(f"{path} is not a seqrec candidate file: {exc}") from None


def evaluate_sampled(
    recommender: Any,
    targets: Targets,
    candidates: SampledCandidates,
    ks: tuple[int, ...] = (1, 5, 10),
    average: str = "user",
    chunk_size: int = 1024,
    progress: bool = False,
    ties: str = "pessimistic",
) -> EvalResult:
    """Rank each positive among its ``N`` negatives; labelled ``sampled-<N>-<strategy>``.

    Metric names are the usual ones (``HR@10``...); ``EvalResult.ranking`` carries the label
    and every printed table shows it. Coverage is not reported (it needs full ranking).
    """
    ks = check_common(targets, ks, average, chunk_size)
    check_ties(ties)
    candidates.check_matches(targets)
    N = candidates.n_negatives
    if max(ks) > N:
        raise ConfigError(f"ks must be <= n_negatives={N} for sampled ranking, got {list(ks)}")
    t0 = time.perf_counter()
    n_items = targets.sequences.n_items
    seen_filter = "history" if candidates.exclude_history else "none"
    T = len(targets)
    ranks = np.empty(T, np.int64)
    for sl in chunks(T, int(chunk_size), progress, "evaluate (sampled)"):
        hist = targets.histories(sl)
        qt = None if targets.times is None else targets.times[sl]
        scores = check_scores(recommender.score(hist, query_times=qt), len(hist), n_items + 1)
        apply_seen_filter(scores, hist, seen_filter)  # only ever hits a positive in its history
        B = len(hist)
        # [B, N + 2]: column 0 plays PAD (-inf), column 1 the positive, then the negatives
        cand = np.full((B, N + 2), -np.inf, dtype=np.float64)
        cand[:, 1] = scores[np.arange(B), candidates.items[sl]]
        cand[:, 2:] = np.take_along_axis(scores, candidates.negatives[sl], axis=1)
        ranks[sl] = target_ranks(cand, np.ones(B, np.int64), ties)
    groups = user_groups(targets)
    metrics, ci95 = summarize(ranks, ks, groups if average == "user" else None)
    return EvalResult(
        metrics=metrics,
        ci95=ci95,
        ranks=ranks,
        n_targets=T,
        n_users=int(len(np.unique(groups))),
        seconds=time.perf_counter() - t0,
        seen_filter=seen_filter,
        average=average,
        ks=ks,
        ranking=candidates.label,
        ties=ties,
    )
