"""``Sequences`` (CSR user histories) and ``Targets`` (what evaluation asks a model to predict).

No torch import: factorization models use these too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from seqrec.data.vocab import ItemVocab
from seqrec.errors import DataError


@dataclass(frozen=True)
class Sequences:
    """Time-ordered item histories in CSR form.

    Row ``r`` is ``items[offsets[r]:offsets[r + 1]]`` (oldest first); items are internal ids
    ``1..n_items`` (0 is PAD and never stored).

    Args:
        offsets: int64 ``[R + 1]`` row boundaries, ``offsets[0] == 0``.
        items: int64 ``[nnz]`` item ids.
        n_items: catalogue size (ids run ``1..n_items``).
        timestamps: optional int64 ``[nnz]`` Unix seconds aligned with ``items``.
        users: optional int64 ``[R]`` internal user id of each row.
        vocab: optional item vocabulary (raw id <-> internal id, item attributes), carried
            for ``recommend`` and for models that read item side information.
        has_time: whether ``timestamps`` are real Unix seconds (False: only a file order).
    """

    offsets: np.ndarray
    items: np.ndarray
    n_items: int
    timestamps: np.ndarray | None = None
    users: np.ndarray | None = None
    vocab: ItemVocab | None = None
    has_time: bool = True

    def __post_init__(self) -> None:
        offsets = np.asarray(self.offsets, dtype=np.int64)
        items = np.asarray(self.items, dtype=np.int64)
        object.__setattr__(self, "offsets", offsets)
        object.__setattr__(self, "items", items)
        if offsets.ndim != 1 or len(offsets) < 1 or offsets[0] != 0 or offsets[-1] != len(items):
            raise DataError("offsets must start at 0 and end at len(items)")
        if np.any(np.diff(offsets) < 0):
            raise DataError("offsets must be non-decreasing")
        if self.n_items < 1:
            raise DataError(f"n_items must be >= 1, got {self.n_items}")
        if len(items) and (items.min() < 1 or items.max() > self.n_items):
            raise DataError(
                f"item ids must lie in 1..{self.n_items}, got {items.min()}..{items.max()}"
            )
        if self.timestamps is not None:
            ts = np.asarray(self.timestamps, dtype=np.int64)
            if len(ts) != len(items):
                raise DataError("timestamps must align with items")
            object.__setattr__(self, "timestamps", ts)
        if self.users is not None:
            users = np.asarray(self.users, dtype=np.int64)
            if len(users) != len(offsets) - 1:
                raise DataError("users must have one entry per row")
            object.__setattr__(self, "users", users)

    # --- construction -------------------------------------------------------------------
    @classmethod
    def from_lists(
        cls,
        rows: list[list[int]] | list[np.ndarray],
        n_items: int | None = None,
        timestamps: list[list[int]] | None = None,
        users: np.ndarray | None = None,
        vocab: ItemVocab | None = None,
        has_time: bool = True,
    ) -> Sequences:
        lengths = np.array([len(r) for r in rows], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        items = (
            np.concatenate([np.asarray(r, dtype=np.int64) for r in rows])
            if len(rows) and offsets[-1]
            else np.zeros(0, np.int64)
        )
        ts = None
        if timestamps is not None:
            ts = (
                np.concatenate([np.asarray(t, dtype=np.int64) for t in timestamps])
                if offsets[-1]
                else np.zeros(0, np.int64)
            )
        if n_items is None:
            n_items = int(items.max()) if len(items) else 1
        return cls(offsets, items, n_items, ts, users, vocab, has_time)

    # --- access -------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    @property
    def row_ids(self) -> np.ndarray:
        """Row index of every stored item, ``[nnz]``."""
        return np.repeat(np.arange(len(self), dtype=np.int64), self.lengths)

    def row(self, r: int) -> np.ndarray:
        return self.items[self.offsets[r] : self.offsets[r + 1]]

    def row_times(self, r: int) -> np.ndarray | None:
        if self.timestamps is None:
            return None
        return self.timestamps[self.offsets[r] : self.offsets[r + 1]]

    def __iter__(self) -> Iterator[np.ndarray]:
        for r in range(len(self)):
            yield self.row(r)

    def select(self, rows: np.ndarray) -> Sequences:
        """A new ``Sequences`` holding rows ``rows`` in that order (vectorized gather)."""
        return self.slice_rows(rows, np.zeros(len(rows), np.int64), self.lengths[rows])

    def slice_rows(self, rows: np.ndarray, starts: np.ndarray, stops: np.ndarray) -> Sequences:
        """Row ``rows[j]`` restricted to positions ``starts[j]:stops[j]``, vectorized."""
        rows = np.asarray(rows, dtype=np.int64)
        starts = np.asarray(starts, dtype=np.int64)
        stops = np.asarray(stops, dtype=np.int64)
        lengths = np.maximum(stops - starts, 0)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        # gather index: offsets_src[row] + start + (0..len-1)
        base = np.repeat(self.offsets[rows] + starts - offsets[:-1], lengths)
        idx = base + np.arange(offsets[-1], dtype=np.int64)
        return Sequences(
            offsets,
            self.items[idx],
            self.n_items,
            None if self.timestamps is None else self.timestamps[idx],
            None if self.users is None else self.users[rows],
            self.vocab,
            self.has_time,
        )

    def to_csr(self, weights: np.ndarray | None = None):
        """The binary user x item matrix ``[R, n_items + 1]`` (column 0 = PAD stays empty)."""
        import scipy.sparse as sp

        data = np.ones(len(self.items), np.float32) if weights is None else weights
        mat = sp.csr_matrix((data, (self.row_ids, self.items)), shape=(len(self), self.n_items + 1))
        mat.sum_duplicates()
        if weights is None:
            mat.data[:] = 1.0
        return mat

    def item_counts(self) -> np.ndarray:
        """Interactions per item id, ``[n_items + 1]`` (index 0 = PAD = 0)."""
        return np.bincount(self.items, minlength=self.n_items + 1)


@dataclass(frozen=True)
class Targets:
    """Evaluation targets: for target ``t`` the model sees the history
    ``sequences.row(rows[t])[:cutoffs[t]]`` and must rank ``items[t]``.

    Leave-last-out has one target per user; the global temporal protocol has one per
    test-window interaction with the history growing by the earlier test items.

    Args:
        sequences: full per-user sequences the histories are cut from.
        rows: int64 ``[T]`` row of ``sequences``.
        cutoffs: int64 ``[T]`` history length.
        items: int64 ``[T]`` target item.
        times: optional int64 ``[T]`` target timestamp (the query time of time-aware models).
    """

    sequences: Sequences
    rows: np.ndarray
    cutoffs: np.ndarray
    items: np.ndarray
    times: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.rows)
        if len(self.cutoffs) != n or len(self.items) != n:
            raise DataError("rows, cutoffs and items must have equal length")
        if self.times is not None and len(self.times) != n:
            raise DataError("times must align with rows")

    def __len__(self) -> int:
        return len(self.rows)

    def histories(self, index: np.ndarray | slice | None = None) -> Sequences:
        """The input histories of targets ``index`` as ``Sequences`` (one row per target)."""
        rows, cut = self.rows, self.cutoffs
        if index is not None:
            rows, cut = rows[index], cut[index]
        return self.sequences.slice_rows(rows, np.zeros(len(rows), np.int64), cut)

    def subset(self, index: np.ndarray) -> Targets:
        return Targets(
            self.sequences,
            self.rows[index],
            self.cutoffs[index],
            self.items[index],
            None if self.times is None else self.times[index],
        )
