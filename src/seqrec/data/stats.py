"""Dataset statistics for ``seqrec data describe``."""

from __future__ import annotations

from typing import Any

import numpy as np

from seqrec.data.interactions import Interactions


def describe(inter: Interactions) -> dict[str, Any]:
    """Users, items, interactions, sequence lengths, density, time span."""
    _, lengths = np.unique(inter.user, return_counts=True)
    n_users, n_items = len(lengths), inter.n_items
    out: dict[str, Any] = {
        "dataset": inter.name,
        "users": n_users,
        "items": n_items,
        "interactions": len(inter),
        "mean_length": float(lengths.mean()),
        "median_length": float(np.median(lengths)),
        "min_length": int(lengths.min()),
        "max_length": int(lengths.max()),
        "density": len(inter) / (n_users * n_items),
        "timestamps": "yes" if inter.has_time else "order only",
    }
    pairs = np.unique(inter.user.astype(np.int64) * (int(inter.item.max()) + 1) + inter.item)
    out["repeated_pairs"] = len(inter) - len(
        pairs
    )  # (user, item) seen again: data.dedup=true drops
    if inter.has_time:
        out["first_time"] = _when(int(inter.timestamp.min()))
        out["last_time"] = _when(int(inter.timestamp.max()))
    return out


def _when(seconds: int) -> str:
    """Unix seconds with the date they stand for (a wrong time unit shows at a glance)."""
    import datetime as dt

    try:
        date = dt.datetime.fromtimestamp(seconds, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return f"{seconds:,}"
    return f"{date} ({seconds:,})"
