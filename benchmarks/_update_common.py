"""Shared pieces of the update benchmarks (``bench_update.py``, ``bench_continual.py``): raw id
columns of a log and the NDCG@10 / HR@10 of a model on a set of targets."""

from __future__ import annotations

import numpy as np

from seqrec.evaluation import evaluate


def raw_columns(inter, items_as_text: bool = True):
    """Raw user ids (text) and raw item ids of every row (text unless ``items_as_text`` is
    false: then as the log holds them)."""
    users = (
        np.asarray(inter.user_raw, dtype=object)[inter.user]
        if inter.user_raw is not None
        else inter.user
    )
    items = inter.item
    if inter.items is not None and "raw_id" in inter.items:
        items = np.asarray(inter.items["raw_id"], dtype=object)[inter.item]
    users = np.asarray([str(u) for u in users.tolist()], dtype=object)
    if items_as_text:
        items = np.asarray([str(i) for i in items.tolist()], dtype=object)
    return users, items


def metrics(model, targets, subset=None):
    """NDCG@10 and HR@10 (history seen-filter) on ``targets`` or their ``subset``, and the
    standard error of the NDCG@10 (from its normal-approximation 95% interval)."""
    t = targets if subset is None else targets.subset(np.asarray(subset, np.int64))
    if len(t) == 0:
        return {
            "NDCG@10": float("nan"),
            "NDCG@10_se": float("nan"),
            "HR@10": float("nan"),
            "targets": 0,
        }
    res = evaluate(model, t, ks=(10,), seen_filter="history")
    lo, hi = res.ci95["NDCG@10"]
    return {
        "NDCG@10": float(res.metrics["NDCG@10"]),
        "NDCG@10_se": float((hi - lo) / (2 * 1.959964)),
        "HR@10": float(res.metrics["HR@10"]),
        "targets": int(res.n_targets),
    }
