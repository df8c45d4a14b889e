"""What an approximate item index costs in accuracy, against exact ranking on the same model.

:func:`index_accuracy` ranks each target's history twice, by scoring every item
(``Recommender.top_k``) and through the model's item index (:func:`seqrec.models.ann.index_top_k`,
with the same seen filter), and reports the recall of the exact top-k in the index's top-k
and NDCG@k / HR@k of both, computed the same way from the two top-k lists (one value per
target, averaged).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from seqrec.data.sequences import Targets
from seqrec.errors import ConfigError
from seqrec.evaluation.ranking import seen_positions


def index_accuracy(
    model: Any,
    targets: Targets,
    k: int = 10,
    seen_filter: str = "history",
    window: int | None = None,
    chunk_size: int = 1024,
) -> dict[str, Any]:
    """Exact against index top-``k`` on ``targets`` (see the module docstring).

    Returns a dict with ``targets``, ``recall@k`` (of the exact top-k), ``exact`` and
    ``index`` (each ``{"NDCG@k", "HR@k", "seconds"}``) and ``exact_fallback_rows`` (rows the
    index could not answer completely, ranked exactly as ``recommend`` does).
    """
    from seqrec.models.ann import index_top_k

    if getattr(model, "index", None) is None:
        raise ConfigError(
            f"{model.name} artifact has no item index (or faiss is missing): build one "
            "with `seqrec index RUN`"
        )
    n = len(targets)
    exact_top = np.zeros((n, k), dtype=np.int64)
    index_top = np.zeros((n, k), dtype=np.int64)
    seconds = {"exact": 0.0, "index": 0.0}
    fallback = 0
    for start in range(0, n, chunk_size):
        idx = np.arange(start, min(start + chunk_size, n))
        hist = targets.histories(idx)
        qt = None if targets.times is None else targets.times[idx]
        t0 = time.process_time()
        exact_top[idx], _ = model.top_k(hist, k, seen_filter, window, qt)
        t1 = time.process_time()
        rows = np.flatnonzero(hist.lengths > 0)
        index_top[idx] = exact_top[idx]  # empty histories: the same popularity fallback
        if len(rows):
            sub = hist.select(rows)
            q = model.query_vectors(sub, None if qt is None else qt[rows])
            ids, _, short = index_top_k(model.index, q, k, seen_positions(sub, seen_filter, window))
            ids[short] = exact_top[idx[rows[short]]]
            fallback += int(short.sum())
            index_top[idx[rows]] = ids
        seconds["exact"] += t1 - t0
        seconds["index"] += time.process_time() - t1
    items = targets.items
    found = [(exact_top[r][exact_top[r] > 0], index_top[r][index_top[r] > 0]) for r in range(n)]
    recall = np.mean([len(np.intersect1d(e, i)) / len(e) for e, i in found if len(e)])
    out: dict[str, Any] = {
        "targets": n,
        f"recall@{k}": float(recall),
        "exact_fallback_rows": fallback,
    }
    for name, top in (("exact", exact_top), ("index", index_top)):
        hit = top == items[:, None]
        rank = np.where(hit.any(1), hit.argmax(1), k)
        ndcg = np.where(rank < k, 1.0 / np.log2(rank + 2.0), 0.0)
        out[name] = {
            f"NDCG@{k}": float(ndcg.mean()),
            f"HR@{k}": float((rank < k).mean()),
            "cpu_seconds": seconds[name],
        }
    return out
