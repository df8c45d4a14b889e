"""Numeric item vectors from an item file (e.g. text or image embeddings computed elsewhere).

An item file may carry one vector per item in a column mapped to the ``vector`` role
(``data.item_columns=vector=<col>``, or a column named ``vector``): numbers separated by
spaces, commas or semicolons, optionally in brackets (``[0.12, -0.5, ...]``), or a Parquet
list column. They travel as text through the side table (like titles and categories) and are
parsed here, once the kept items are known, into a float32 matrix whose rows follow the
internal ids; an item without a vector gets a row of NaN. Every vector must have the same
length: a mismatch is an error naming the item, never a silent truncation.

Models with ``item_attributes = 'ids+attributes'`` add a learned projection of the vector to the
item's representation (:mod:`seqrec.models.item_attributes`), so an item with a vector and no
interactions gets a score from it.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

import numpy as np

from seqrec.errors import DataError

_SEPARATORS = re.compile(r"[\s,;]+")


def parse_vector(text: Any) -> np.ndarray | None:
    """One vector from its text (None for an empty cell).

    Raises:
        DataError: a field that is not a finite number.
    """
    if text is None:
        return None
    body = str(text).strip().strip("[]()").strip()
    if not body:
        return None
    fields = [f for f in _SEPARATORS.split(body) if f]
    try:
        values = np.asarray([float(f) for f in fields], np.float32)
    except ValueError:
        bad = next(f for f in fields if not _is_number(f))
        raise DataError(f"item vector: {bad!r} is not a number (in {str(text)[:60]!r})") from None
    if not np.isfinite(values).all():
        raise DataError(f"item vector: not every value is finite (in {str(text)[:60]!r})")
    return values


def vectors_from_texts(texts: Iterable[Any], raw_ids: Iterable[Any]) -> np.ndarray | None:
    """The ``[n, k]`` float32 matrix of the items' vectors (NaN rows: no vector), or None when
    no item has one.

    Raises:
        DataError: a vector that does not parse, or lengths that differ (naming the item).
    """
    parsed: list[tuple[Any, np.ndarray | None]] = []
    for raw, text in zip(raw_ids, texts, strict=True):
        try:
            parsed.append((raw, parse_vector(text)))
        except DataError as exc:
            raise DataError(f"item {raw!r}: {exc}") from None
    present = [(raw, v) for raw, v in parsed if v is not None]
    if not present:
        return None
    first_raw, first = present[0]
    out = np.full((len(parsed), len(first)), np.nan, np.float32)
    for row, (raw, v) in enumerate(parsed):
        if v is None:
            continue
        if len(v) != len(first):
            raise DataError(
                f"item vectors differ in length: item {raw!r} has {len(v)} values, item "
                f"{first_raw!r} {len(first)}"
            )
        out[row] = v
    return out


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
