"""``Interactions``: the validated, columnar table every source returns.

Columns are NumPy arrays of equal length: ``user``, ``item`` (int64 ids), ``timestamp`` (int64 Unix
seconds; a file with order but no time gets ``0, 1, 2, ...`` within the file and
``has_time=False``), and an optional ``rating`` (float32). An optional ``items`` side table maps
item id -> title / genres / category (dict of equal-length arrays with an ``item`` column); an
optional ``item_attributes`` (:class:`seqrec.data.attributes.ItemAttributes`) holds multi-valued
attributes (categories, brands, tags) keyed by the same item ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from seqrec.errors import DataError

if TYPE_CHECKING:
    from seqrec.data.attributes import ItemAttributes

REQUIRED = ("user", "item", "timestamp")


def _as_int64(name: str, values: Any) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise DataError(f"column '{name}' must be one-dimensional, got shape {arr.shape}")
    if arr.dtype.kind == "f":
        if np.isnan(arr).any():
            raise DataError(f"column '{name}' contains NaN")
        if not np.all(np.mod(arr, 1) == 0):
            raise DataError(f"column '{name}' must hold integers, got non-integer floats")
        return arr.astype(np.int64)
    if arr.dtype.kind not in "iu":
        raise DataError(f"column '{name}' must hold integers, got dtype {arr.dtype}")
    return arr.astype(np.int64, copy=False)


@dataclass(frozen=True)
class Interactions:
    """A validated interaction log.

    Args:
        user: int64 user ids.
        item: int64 item ids.
        timestamp: int64 Unix seconds (or a within-file order when ``has_time`` is False).
        rating: optional float32 explicit feedback.
        items: optional item side table, ``{"item": ids, "title": ..., "genres": ...}``.
        has_time: whether ``timestamp`` holds real time rather than file order.
        name: dataset name, for reports.
        notes: preprocessing steps applied so far (recorded in every result).
        item_attributes: optional long table of item attributes (categories, brands, tags).
        user_raw: optional original text of string user ids, ``user_raw[code]`` for the code
            stored in ``user`` (so that a trained model can answer for user ``"u17"``).
    """

    user: np.ndarray
    item: np.ndarray
    timestamp: np.ndarray
    rating: np.ndarray | None = None
    items: dict[str, np.ndarray] | None = None
    has_time: bool = True
    name: str = "unnamed"
    notes: tuple[str, ...] = field(default_factory=tuple)
    item_attributes: ItemAttributes | None = None
    user_raw: np.ndarray | None = None

    def __post_init__(self) -> None:
        cols = {"user": self.user, "item": self.item, "timestamp": self.timestamp}
        for key, val in cols.items():
            if val is None:
                raise DataError(
                    f"missing required column '{key}' (required: {', '.join(REQUIRED)})"
                )
        object.__setattr__(self, "user", _as_int64("user", self.user))
        object.__setattr__(self, "item", _as_int64("item", self.item))
        object.__setattr__(self, "timestamp", _as_int64("timestamp", self.timestamp))
        n = len(self.user)
        if n == 0:
            raise DataError(f"dataset '{self.name}' is empty: no interactions")
        for key in ("item", "timestamp"):
            if len(getattr(self, key)) != n:
                raise DataError(
                    f"column '{key}' has {len(getattr(self, key))} rows, 'user' has {n}"
                )
        if (self.timestamp < 0).any():
            raise DataError(f"column 'timestamp' has {(self.timestamp < 0).sum()} negative values")
        if self.rating is not None:
            rating = np.asarray(self.rating, dtype=np.float32)
            if len(rating) != n:
                raise DataError(f"column 'rating' has {len(rating)} rows, 'user' has {n}")
            if np.isnan(rating).any():
                raise DataError("column 'rating' contains NaN")
            object.__setattr__(self, "rating", rating)
        if self.items is not None and "item" not in self.items:
            raise DataError("item side table needs an 'item' column")

    def __len__(self) -> int:
        return len(self.user)

    @property
    def n_users(self) -> int:
        return int(np.unique(self.user).size)

    @property
    def n_items(self) -> int:
        return int(np.unique(self.item).size)

    def take(self, index: np.ndarray, note: str | None = None) -> Interactions:
        """Rows ``index`` (a boolean mask or integer positions), keeping the side table."""
        notes = self.notes + ((note,) if note else ())
        return Interactions(
            user=self.user[index],
            item=self.item[index],
            timestamp=self.timestamp[index],
            rating=None if self.rating is None else self.rating[index],
            items=self.items,
            has_time=self.has_time,
            name=self.name,
            notes=notes,
            item_attributes=self.item_attributes,
            user_raw=self.user_raw,
        )

    def replace(self, **changes: Any) -> Interactions:
        from dataclasses import replace

        return replace(self, **changes)
