"""The event of the live service: one interaction, raw ids as text, Unix seconds."""

from __future__ import annotations

import time as _time
from dataclasses import dataclass
from typing import Any

from seqrec.data.raw_times import aligned_times
from seqrec.errors import DataError


@dataclass(frozen=True)
class Event:
    """One interaction: raw user and item ids (text), Unix seconds, and an optional client id
    that makes re-sending the event harmless."""

    user: str
    item: str
    time: int
    id: str | None = None


def make_event(
    user: Any, item: Any, time: Any = None, id: Any = None, now: int | None = None
) -> Event:
    """An :class:`Event` from request values: ids as text; ``time`` Unix seconds or an ISO date
    (``None``: ``now``, the receiving clock); a bad value is a ``DataError`` naming it."""
    for name, value in (("user", user), ("item", item)):
        if value is None or isinstance(value, bool) or str(value).strip() == "":
            raise DataError(f"event {name} must be a non-empty id, got {value!r}")
    if time is None:
        seconds = int(_time.time()) if now is None else int(now)
    else:
        (seconds,) = aligned_times([True], [time], 0).tolist()
    return Event(str(user), str(item), int(seconds), None if id is None else str(id))
