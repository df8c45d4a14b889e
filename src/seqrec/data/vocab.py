"""The item vocabulary: raw item id <-> internal id ``1..n`` (0 = PAD), with the titles,
categories and attributes that travel with a trained model (its own module so that sequences,
preprocessing and artifacts can all use it without importing each other)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

from seqrec.data.attributes import ItemAttributes
from seqrec.errors import DataError


@dataclass(frozen=True)
class ItemVocab:
    """Raw item id <-> internal id. ``raw[i - 1]`` is the raw id of internal id ``i``.

    ``attributes`` (optional) holds the item attributes keyed by internal id (``1..n``).
    """

    raw: np.ndarray
    titles: np.ndarray | None = None
    attributes: ItemAttributes | None = None
    categories: np.ndarray | None = None
    """Per-item category text (e.g. ``Comedy|Drama``), from an item-metadata file."""
    removed: np.ndarray | None = None
    """Raw ids present in the source data but removed by preprocessing (filters), as text:
    lets ``recommend`` tell a filtered item from one never seen."""
    vectors: np.ndarray | None = None
    """float32 ``[n, k]`` numeric item vectors from an item file (row ``i - 1`` for internal id
    ``i``; NaN rows: no vector), :mod:`seqrec.data.item_vectors`. Held in memory for training
    and growth; a model that reads them stores its own copy with its weights."""

    def __len__(self) -> int:
        return len(self.raw)

    def _lookup(self) -> dict[Any, int]:
        cache = self.__dict__.get("_index")
        if cache is None:
            cache = {self._key(r): i + 1 for i, r in enumerate(self.raw.tolist())}
            object.__setattr__(self, "_index", cache)
        return cache

    @staticmethod
    def _key(value: Any) -> Any:
        # CLI histories arrive as strings; raw ids are usually ints: compare as text then.
        return str(value)

    def encode(self, raw_ids: Iterable[Any]) -> np.ndarray:
        """Internal ids; unknown raw ids raise ``DataError``."""
        index = self._lookup()
        out = []
        for r in raw_ids:
            key = self._key(r)
            if key not in index:
                raise DataError(f"unknown item id {r!r}")
            out.append(index[key])
        return np.asarray(out, dtype=np.int64)

    def encode_known(self, raw_ids: Iterable[Any]) -> tuple[np.ndarray, int]:
        """Internal ids of the known raw ids, and how many were unknown (skipped)."""
        index = self._lookup()
        ids = [index.get(self._key(r), 0) for r in raw_ids]
        arr = np.asarray(ids, dtype=np.int64)
        return arr[arr > 0], int((arr == 0).sum())

    def decode(self, ids: np.ndarray) -> np.ndarray:
        return self.raw[np.asarray(ids, dtype=np.int64) - 1]

    def title(self, internal_id: int) -> str | None:
        """Title of an internal id; None when there is no title table or no title for it."""
        return _text(self.titles, internal_id)

    def category(self, internal_id: int) -> str | None:
        """Category text of an internal id (None when unknown)."""
        return _text(self.categories, internal_id)

    def unknown_ids(self, raw_ids: Iterable[Any]) -> list[Any]:
        """The raw ids this vocabulary does not hold, each once, in first-occurrence order."""
        index = self._lookup()
        new: list[Any] = []
        seen: set[Any] = set()
        for r in raw_ids:
            key = self._key(r)
            if key not in index and key not in seen:
                seen.add(key)
                new.append(r)
        return new

    def extend(
        self,
        raw_ids: Iterable[Any],
        titles: dict[Any, Any] | None = None,
        attributes: dict[Any, Iterable[tuple[str, int]]] | None = None,
        categories: dict[Any, Any] | None = None,
        vectors: dict[Any, np.ndarray] | None = None,
    ) -> ItemVocab:
        """This vocabulary with the unknown ids of ``raw_ids`` appended (first occurrence order,
        each once): every known id keeps its internal id, the new ones get ``n + 1, n + 2 ...``.

        ``titles`` (raw id -> title) and ``categories`` (raw id -> category text such as
        ``Comedy|Drama``) fill the new ids' titles and categories (empty where absent).
        ``attributes`` (raw id -> ``(kind, attribute id)`` pairs, e.g.
        ``{"sku9": [("brand", 12), ("category", 3)]}``) adds attribute rows for the new ids
        (entries for ids already known are not used: an item keeps the attributes it trained
        with); without it the new ids have no attribute rows. ``vectors`` (raw id -> numeric
        vector of the vocabulary's length) fills the new ids' rows of ``vectors`` (NaN where
        absent). An id that preprocessing had
        removed is no longer counted as removed once it is added.
        """
        new = self.unknown_ids(raw_ids)
        if not new:
            return self
        raw = np.concatenate([self.raw, _like(self.raw, new)])
        if raw.dtype.kind == "O" and self.raw.dtype.kind in "iu":
            raise DataError(
                f"new item ids {new[:3]!r} are not integers like the vocabulary's "
                f"(e.g. {self.raw[:1].tolist()!r})"
            )
        out_titles = self._extended_text(self.titles, new, titles)
        out_categories = self._extended_text(self.categories, new, categories)
        removed = self.removed
        if removed is not None:
            added = {self._key(r) for r in new}
            removed = np.asarray([r for r in removed.tolist() if str(r) not in added], str)
        return ItemVocab(
            raw,
            out_titles,
            self._extended_attributes(new, attributes),
            out_categories,
            removed,
            self._extended_vectors(new, vectors),
        )

    def _extended_vectors(
        self, new: list[Any], vectors: dict[Any, np.ndarray] | None
    ) -> np.ndarray | None:
        """``vectors`` with rows for the ``new`` raw ids (NaN where they have none)."""
        by_key = {self._key(k): np.asarray(v, np.float32) for k, v in (vectors or {}).items()}
        if not by_key and self.vectors is None:
            return None
        width = (
            self.vectors.shape[1] if self.vectors is not None else len(next(iter(by_key.values())))
        )
        rows = np.full((len(new), width), np.nan, np.float32)
        for i, r in enumerate(new):
            v = by_key.get(self._key(r))
            if v is None:
                continue
            if v.shape != (width,):
                raise DataError(
                    f"item {r!r}: its vector has {v.size} values, the vocabulary's have {width}"
                )
            rows[i] = v
        old = self.vectors
        if old is None:
            old = np.full((len(self), width), np.nan, np.float32)
        return np.concatenate([old, rows])

    def _extended_text(
        self, column: np.ndarray | None, new: list[Any], values: dict[Any, Any] | None
    ) -> np.ndarray | None:
        """A per-item text column with the ``new`` raw ids' values appended ("" = none)."""
        by_key = {self._key(k): v for k, v in (values or {}).items()}
        added = [str(by_key.get(self._key(r)) or "") for r in new]
        if column is None and not any(added):
            return None
        old = column if column is not None else np.full(len(self), "", object)
        return np.concatenate([np.asarray(old, object), np.asarray(added, object)])

    def _extended_attributes(
        self, new: list[Any], attributes: dict[Any, Iterable[tuple[str, int]]] | None
    ) -> ItemAttributes | None:
        """The attribute table with rows for the ``new`` raw ids (internal ids after ours)."""
        by_key = {self._key(k): v for k, v in (attributes or {}).items()}
        rows = []
        for i, r in enumerate(new):
            for position, (kind, value) in enumerate(by_key.get(self._key(r)) or ()):
                rows.append((len(self) + 1 + i, int(value), str(kind), position))
        if not rows:
            return self.attributes
        item, value, kind, position = (list(col) for col in zip(*rows, strict=True))
        old = self.attributes
        if old is None:
            return ItemAttributes(
                np.asarray(item, np.int64),
                np.asarray(value, np.int64),
                np.asarray(kind),
                np.asarray(position, np.int64),
            )
        return ItemAttributes(
            np.concatenate([old.item, np.asarray(item, np.int64)]),
            np.concatenate([old.attribute, np.asarray(value, np.int64)]),
            np.concatenate([old.kind.astype(object), np.asarray(kind, object)]).astype(str),
            np.concatenate([old.position, np.asarray(position, np.int64)]),
        )

    def is_removed(self, raw_id: Any) -> bool:
        """Whether ``raw_id`` was in the source data but removed by preprocessing."""
        if self.removed is None:
            return False
        cache = self.__dict__.get("_removed")
        if cache is None:
            cache = {str(r) for r in self.removed.tolist()}
            object.__setattr__(self, "_removed", cache)
        return self._key(raw_id) in cache


def _like(raw: np.ndarray, values: list[Any]) -> np.ndarray:
    """``values`` as an array of ``raw``'s kind: integers stay integers where they are ones
    (ids read back from text included), text stays text."""
    if raw.dtype.kind in "iu":
        try:
            return np.asarray([int(str(v)) for v in values], dtype=raw.dtype)
        except ValueError:
            return np.asarray(values, dtype=object)
    if raw.dtype.kind == "U":  # its own width: concatenation keeps the wider of the two
        return np.asarray([str(v) for v in values])
    return np.asarray([str(v) for v in values], dtype=object)


def _text(column: np.ndarray | None, internal_id: int) -> str | None:
    if column is None:
        return None
    value = column[internal_id - 1]
    # "" is how a saved vocabulary stores a missing value (npz strings have no None)
    return None if value is None or value == "" else str(value)
