"""Times that come with a history of raw item ids (a request, a CLI line): Unix seconds or ISO
dates, one per item, kept for the items the model knows."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from seqrec.errors import DataError


def aligned_times(history: list[Any], times: Sequence[Any], vocab: Any, row: int) -> np.ndarray:
    """Unix seconds of the known items of ``history`` (unknown ids are skipped with their time)."""
    times = list(times)
    if len(times) != len(history):
        raise DataError(f"times: history {row} has {len(history)} items and {len(times)} times")
    keep = [vocab.encode_known([h])[1] == 0 for h in history]
    seconds = []
    for t in times:
        if isinstance(t, bool):
            raise DataError(f"times: history {row} has a boolean time {t!r}")
        try:
            seconds.append(
                int(t)
                if isinstance(t, (int, np.integer))
                else int(float(t))
                if _is_number(t)
                else int(np.datetime64(str(t).rstrip("Z"), "s").astype(np.int64))
            )
        except (ValueError, TypeError, OverflowError):
            raise DataError(
                f"times: {t!r} in history {row} is neither Unix seconds nor an ISO date"
            ) from None
    return np.asarray([s for s, k in zip(seconds, keep, strict=True) if k], dtype=np.int64)


def _is_number(value: Any) -> bool:
    try:
        float(value)
        return True
    except (TypeError, ValueError):
        return False
