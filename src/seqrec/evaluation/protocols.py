"""Full-ranking evaluation of a :class:`~seqrec.models.base.Recommender` on ``Targets``.

``evaluate`` asks the model for scores chunk by chunk (``chunk_size`` targets at a time, so
users x items is never materialized at once), applies the seen-item filter, ranks each target
against the whole catalogue and reports HR/Recall@k, NDCG@k, MRR and COV@k with 95% CIs.

Averaging: ``"user"`` first averages each metric over a user's targets, then over users
(the CI is over users); ``"interaction"`` averages over targets (the tensor/SATF paper's
protocol). With one target per user (leave-last-out) both give the same numbers.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from seqrec.data.sequences import Targets
from seqrec.errors import ConfigError, DataError
from seqrec.evaluation.metrics import coverage, summarize
from seqrec.evaluation.ranking import check_scores, check_seen_filter, check_ties, rank_chunk

log = logging.getLogger(__name__)

AVERAGES = ("user", "interaction")


@dataclass
class EvalResult:
    """Metrics of one evaluation run and everything needed to interpret them.

    Attributes:
        metrics: name -> value, e.g. ``{"HR@10": .., "Recall@10": .., "NDCG@10": .., "MRR": ..,
            "COV@10": ..}``.
        ci95: name -> ``(lo, hi)`` normal-approximation 95% CI (coverage has none: it is a
            catalogue-level quantity, not an average).
        ranks: int64 ``[T]`` 0-based rank of each target (``n_items`` = filtered out).
        topk: optional int64 ``[T, max(ks)]`` top-k ids per target (0 = no rankable item).
        n_targets: number of targets ranked.
        n_users: number of distinct users among them.
        seconds: wall time of the evaluation, scoring included.
        seen_filter: ``history`` / ``window`` / ``none`` (``window`` records its size).
        average: ``user`` or ``interaction``.
        ks: cut-offs reported.
        ranking: ``full`` or ``sampled-<N>-<uniform|popularity>``.
        ties: tie policy used for the ranks.
        window: window size of the ``window`` filter, else None.
    """

    metrics: dict[str, float]
    ci95: dict[str, tuple[float, float]]
    ranks: np.ndarray
    n_targets: int
    n_users: int
    seconds: float
    seen_filter: str
    average: str
    ks: tuple[int, ...]
    ranking: str = "full"
    ties: str = "pessimistic"
    window: int | None = None
    topk: np.ndarray | None = field(default=None, repr=False)
    coverage_denominator: str = "catalogue"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (no per-target arrays)."""
        return {
            "metrics": {k: float(v) for k, v in self.metrics.items()},
            "ci95": {k: [float(lo), float(hi)] for k, (lo, hi) in self.ci95.items()},
            "n_targets": int(self.n_targets),
            "n_users": int(self.n_users),
            "seconds": float(self.seconds),
            "seen_filter": self.seen_filter,
            "window": self.window,
            "average": self.average,
            "ks": list(self.ks),
            "ranking": self.ranking,
            "ties": self.ties,
            "coverage_denominator": self.coverage_denominator,
        }

    def summary(self, names: tuple[str, ...] | None = None) -> str:
        """One line naming the ranking (so a sampled result always says so) and the metrics."""
        names = names or tuple(self.metrics)
        vals = ", ".join(f"{n}={self.metrics[n]:.4f}" for n in names if n in self.metrics)
        return (
            f"[{self.ranking} ranking, seen_filter={self.seen_filter}, average={self.average}, "
            f"{self.n_targets} targets] {vals}"
        )


def check_ks(ks: Any) -> tuple[int, ...]:
    try:
        out = tuple(int(k) for k in ks)
    except (TypeError, ValueError):
        raise ConfigError(f"ks must be a list of positive integers, got {ks!r}") from None
    if not out or any(k < 1 for k in out) or any(int(a) != a for a in ks):
        raise ConfigError(f"ks must be a non-empty list of positive integers, got {ks!r}")
    return out


def check_common(targets: Targets, ks: Any, average: str, chunk_size: int) -> tuple[int, ...]:
    """Shared argument checks of full and sampled evaluation."""
    ks = check_ks(ks)
    if average not in AVERAGES:
        raise ConfigError(f"unknown average {average!r}; allowed: {', '.join(AVERAGES)}")
    if int(chunk_size) != chunk_size or chunk_size < 1:
        raise ConfigError(f"chunk_size must be >= 1, got {chunk_size!r}")
    if len(targets) == 0:
        raise DataError("no targets to evaluate")
    items = np.asarray(targets.items)
    n = targets.sequences.n_items
    if items.min() < 1 or items.max() > n:
        raise DataError(f"target items must lie in 1..{n}, got {items.min()}..{items.max()}")
    return ks


def user_groups(targets: Targets) -> np.ndarray:
    """User id of each target (the sequence row when the sequences carry no user ids)."""
    users = targets.sequences.users
    rows = np.asarray(targets.rows, dtype=np.int64)
    return rows if users is None else users[rows]


def chunks(n: int, chunk_size: int, progress: bool, desc: str):
    """``slice`` objects over ``range(n)``, with a tqdm bar when ``progress``."""
    starts = range(0, n, chunk_size)
    if progress:
        from tqdm.auto import tqdm

        starts = tqdm(starts, desc=desc, unit="chunk", total=len(starts))
    for s in starts:
        yield slice(s, min(s + chunk_size, n))


def evaluate(
    recommender: Any,
    targets: Targets,
    ks: tuple[int, ...] = (5, 10, 20),
    seen_filter: str = "history",
    window: int | None = None,
    average: str = "user",
    chunk_size: int = 1024,
    progress: bool = False,
    ties: str = "pessimistic",
    keep_topk: bool = False,
    coverage_items: int | None = None,
) -> EvalResult:
    """Full-ranking evaluation over the whole catalogue.

    For each chunk of targets the model is asked
    ``recommender.score(targets.histories(chunk), query_times=targets.times[chunk] or None)``.

    Args:
        recommender: a fitted ``Recommender``.
        targets: what to predict (from a split).
        ks: cut-offs for HR/Recall/NDCG/COV.
        seen_filter: ``history`` | ``window`` | ``none`` (see :mod:`seqrec.evaluation.ranking`).
        window: size of the ``window`` filter (e.g. the model's ``max_len``); required for it.
        average: ``user`` (mean per user, then over users) or ``interaction``.
        chunk_size: targets scored at once; memory is ``chunk_size x (n_items + 1)`` floats.
        progress: show a tqdm progress bar (the CLI turns it on; the library is silent).
        ties: ``pessimistic`` (default) or ``optimistic``.
        keep_topk: keep the ``[T, max(ks)]`` top-k lists in the result.
        coverage_items: denominator of COV@k; None = the catalogue (``n_items``). The SATF
            code divides by the items of the data the model was fitted on: pass that count
            (the result then says ``coverage_denominator = "fit_items:<n>"``).

    Raises:
        ConfigError: an invalid option. DataError: bad targets or a score matrix of wrong shape.
    """
    ks = check_common(targets, ks, average, chunk_size)
    check_seen_filter(seen_filter, window)
    check_ties(ties)
    t0 = time.perf_counter()
    n_items = int(recommender.n_items) if getattr(recommender, "n_items", None) else None
    n_items = n_items or targets.sequences.n_items
    kmax = min(max(ks), n_items)
    T = len(targets)
    ranks = np.empty(T, np.int64)
    topk = np.zeros((T, kmax), np.int64)
    # Targets in order of history length: a chunk then holds histories of similar length,
    # which sequence models encode with less padding (each target is scored independently).
    order = np.argsort(targets.cutoffs, kind="stable")
    for sl in chunks(T, int(chunk_size), progress, "evaluate"):
        idx = order[sl]
        hist = targets.histories(idx)
        qt = None if targets.times is None else targets.times[idx]
        scores = recommender.score(hist, query_times=qt)
        scores = check_scores(scores, len(hist), n_items + 1)
        ranks[idx], topk[idx] = rank_chunk(
            scores, hist, targets.items[idx], seen_filter, window, ties, kmax
        )
    groups = user_groups(targets)
    metrics, ci95 = summarize(ranks, ks, groups if average == "user" else None)
    for k in ks:
        # fraction of the catalogue, rescaled when the denominator is the fit data's items
        cov = coverage(topk, n_items, min(k, kmax))
        metrics[f"COV@{k}"] = cov * n_items / coverage_items if coverage_items else cov
    seconds = time.perf_counter() - t0
    result = EvalResult(
        metrics=metrics,
        ci95=ci95,
        ranks=ranks,
        n_targets=T,
        n_users=int(len(np.unique(groups))),
        seconds=seconds,
        seen_filter=seen_filter,
        average=average,
        ks=ks,
        ranking="full",
        ties=ties,
        window=int(window) if seen_filter == "window" else None,
        topk=topk if keep_topk else None,
        coverage_denominator="catalogue"
        if not coverage_items
        else f"fit_items:{int(coverage_items)}",
    )
    log.info("%s in %.2fs", result.summary(), seconds)
    return result
