"""The units numeric timestamps may be in, and how a log's unit is told by the size of its
numbers (shared by the eager readers and the lazy Parquet path)."""

from __future__ import annotations

from seqrec.errors import ConfigError

TIME_UNITS = ("auto", "s", "ms", "us", "ns", "iso")
PER_SECOND = {"s": 1, "ms": 1000, "us": 1_000_000, "ns": 1_000_000_000}
UNIT_WORDS = {"ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds"}
# 10^11 s is the year 5138, while every millisecond timestamp after March 1973 exceeds it.
SECONDS_MAX = 10**11


def check_unit(timestamp_unit: str) -> None:
    if timestamp_unit not in TIME_UNITS:
        raise ConfigError(f"timestamp_unit must be one of {', '.join(TIME_UNITS)}, got {timestamp_unit!r}")


def implied_unit(top: float) -> str:
    """The unit numeric times whose largest value is ``top`` are in: seconds, or the finer unit
    that brings them before the year 5000 (shared by the eager and the lazy Parquet readers)."""
    return next(u for u in ("s", "ms", "us", "ns") if top < SECONDS_MAX * PER_SECOND[u] or u == "ns")


def unit_note(used: str, asked: str) -> str | None:
    """The note of times read in a unit other than seconds (None for seconds or dates)."""
    if used in ("s", "iso"):
        return None
    implied = " (their size: past the year 5000 as seconds)" if asked == "auto" else ""
    return f"timestamps read as {UNIT_WORDS[used]}{implied}, stored as Unix seconds"
