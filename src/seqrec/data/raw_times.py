"""Times that come with a history of raw item ids (a request, a CLI line): Unix seconds or ISO
dates, one per item, kept for the items the model knows."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from seqrec.errors import DataError


def aligned_times(keep: list[bool], times: Sequence[Any], row: int) -> np.ndarray:
    """Unix seconds of the kept items of history ``row`` (``keep``: one flag per item; an
    unknown id is skipped with its time)."""
    times = list(times)
    if len(times) != len(keep):
        raise DataError(f"times: history {row} has {len(keep)} items and {len(times)} times")
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
