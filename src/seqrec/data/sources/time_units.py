"""The units numeric timestamps may be in, and how a log's unit is told by the size of its
numbers (shared by the eager readers and the lazy Parquet path)."""

from __future__ import annotations

import numpy as np

from seqrec.errors import ConfigError

TIME_UNITS = ("auto", "s", "ms", "us", "ns", "iso")
PER_SECOND = {"s": 1, "ms": 1000, "us": 1_000_000, "ns": 1_000_000_000}
UNIT_WORDS = {"ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds"}
# 10^11 s is the year 5138, while every millisecond timestamp after March 1973 exceeds it.
SECONDS_MAX = 10**11


def check_unit(timestamp_unit: str) -> None:
    if timestamp_unit not in TIME_UNITS:
        raise ConfigError(
            f"timestamp_unit must be one of {', '.join(TIME_UNITS)}, got {timestamp_unit!r}"
        )


def implied_unit(top: float) -> str:
    """The unit numeric times whose largest value is ``top`` are in: seconds, or the finer unit
    that brings them before the year 5000 (shared by the eager and the lazy Parquet readers)."""
    return next(
        u for u in ("s", "ms", "us", "ns") if top < SECONDS_MAX * PER_SECOND[u] or u == "ns"
    )


def unit_note(used: str, asked: str) -> str | None:
    """The note of times read in a unit other than seconds (None for seconds or dates)."""
    if used in ("s", "iso"):
        return None
    implied = " (their size: past the year 5000 as seconds)" if asked == "auto" else ""
    return f"timestamps read as {UNIT_WORDS[used]}{implied}, stored as Unix seconds"


def size_units(values: np.ndarray) -> np.ndarray:
    """Per value, the index into ``("s", "ms", "us", "ns")`` of the unit its size implies."""
    bounds = [SECONDS_MAX * PER_SECOND[u] for u in ("s", "ms", "us")]
    return np.searchsorted(
        np.asarray(bounds, dtype=np.float64),
        np.abs(np.asarray(values, dtype=np.float64)),
        side="right",
    )


def mixed_units(values: np.ndarray) -> list[tuple[str, int, int]]:
    """``[(unit, rows, first row), ...]`` when the numbers' sizes imply more than one unit (a log
    written half in seconds, half in milliseconds); empty when they agree. Read in one unit,
    the rows of another would be misdated by decades, so readers refuse such a column."""
    sizes = size_units(values)
    present = np.unique(sizes)
    if len(present) <= 1:
        return []
    units = ("s", "ms", "us", "ns")
    return [(units[u], int((sizes == u).sum()), int(np.argmax(sizes == u))) for u in present]


def mixed_units_message(
    values: np.ndarray, groups: list[tuple[str, int, int]], where: str, line_of
) -> str:
    """The one-line refusal of a column that :func:`mixed_units` found mixed."""
    words = {"s": "seconds", **UNIT_WORDS}
    parts = [
        f"{rows:,} look like {words[unit]} (the first at {line_of(first)}: {int(values[first])})"
        for unit, rows, first in groups
    ]
    return (
        f"{where} mixes time units by the size of its numbers: {'; '.join(parts)}. Read in one "
        "unit the others would be misdated by decades: convert the column to one unit (or set "
        "data.time_unit when the odd values really are in that unit)"
    )
