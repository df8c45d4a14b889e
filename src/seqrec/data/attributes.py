"""Item attributes (categories, brands, tags): an optional side table of a dataset.

An item may carry several attributes of several kinds (an Amazon product: one brand and a few
category levels; a Yelp business: a list of categories; a Last.fm artist: tags), so the table is
long: one row per (item, attribute) entry, in the item's source order. It rides on
``Interactions.item_attributes`` (item ids of the interaction file), survives filtering
untouched (it is keyed by item, not by row), is re-keyed to the internal ids ``1..n`` by
:func:`seqrec.data.preprocess.remap` and then lives on ``ItemVocab.attributes``, which every
``Sequences`` of a split carries to the model (``train.vocab.attributes``).

Models that need one category per item call :meth:`ItemAttributes.primary_category`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from seqrec.errors import DataError

OTHER = 1
"""Class id of items without a category, or whose category was folded away."""


@dataclass(frozen=True)
class ItemAttributes:
    """Long table of item attributes.

    Args:
        item: int64 ``[A]`` item id (the ids of the interaction file; internal ``1..n`` after
            preprocessing).
        attribute: int64 ``[A]`` attribute id (brand and category may share one id space; ``kind``
            tells them apart).
        kind: str ``[A]`` kind of each entry, e.g. ``"category"``, ``"brand"``, ``"tag"``.
        position: int64 ``[A]`` order of the entry within its item's source list.
    """

    item: np.ndarray
    attribute: np.ndarray
    kind: np.ndarray
    position: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.item)
        for name in ("attribute", "kind", "position"):
            if len(getattr(self, name)) != n:
                raise DataError(
                    f"item attributes: column '{name}' has {len(getattr(self, name))} "
                    f"rows, 'item' has {n}"
                )
        for name in ("item", "attribute", "position"):
            arr = np.asarray(getattr(self, name))
            if arr.dtype.kind not in "iu":
                raise DataError(
                    f"item attributes: column '{name}' must hold integers, got {arr.dtype}"
                )
            object.__setattr__(self, name, arr.astype(np.int64, copy=False))
        object.__setattr__(self, "kind", np.asarray(self.kind, dtype=str))

    def __len__(self) -> int:
        return len(self.item)

    def kinds(self) -> list[str]:
        """The distinct kinds present, sorted."""
        return sorted(set(np.unique(self.kind).tolist()))

    def remap(self, raw_ids: np.ndarray) -> ItemAttributes:
        """Rows of the items in ``raw_ids`` (sorted unique ids of the kept items), re-keyed to the
        internal id ``position in raw_ids + 1``; rows of dropped items go."""
        raw_ids = np.asarray(raw_ids)
        if len(raw_ids) == 0:
            keep = np.zeros(len(self), bool)
            pos = np.zeros(len(self), np.int64)
        else:
            pos = np.clip(np.searchsorted(raw_ids, self.item), 0, len(raw_ids) - 1)
            keep = raw_ids[pos] == self.item
        return ItemAttributes(
            pos[keep] + 1, self.attribute[keep], self.kind[keep], self.position[keep]
        )

    def primary_category(
        self, n_items: int, kind: str = "category", max_share: float = 0.5, max_classes: int = 0
    ) -> tuple[np.ndarray, int]:
        """One category class per internal item: its most widespread informative category.

        Among an item's entries of ``kind``, the one carried by the most items of the catalogue
        wins (ties: the earlier entry), ignoring attributes carried by more than ``max_share`` of
        the ``n_items`` items: a near-universal root says nothing (Sports' and Toys' category 2
        sits on >99% of items). On a hierarchy this picks the coarsest informative level: Beauty's
        six level-2 categories, Sports' and Toys' level-3 ones; on a flat list (Yelp) the
        business's most common category.

        Args:
            n_items: catalogue size (items are ``1..n_items``).
            kind: which entries count as categories.
            max_share: attributes on more than this share of items are skipped.
            max_classes: keep at most this many categories (the most widespread), folding the
                others into :data:`OTHER`; 0 keeps all.

        Returns:
            ``(classes, n_classes)``: int64 ``[n_items + 1]`` with 0 at index 0 (PAD), 1
            (:data:`OTHER`) for items without a kept category and ``2..n_classes`` for the
            categories in order of decreasing item count; ``n_classes`` counts ``OTHER``.
        """
        rows = (self.kind == kind) & (self.item >= 1) & (self.item <= n_items)
        item, attr, position = self.item[rows], self.attribute[rows], self.position[rows]
        classes = np.full(n_items + 1, OTHER, np.int64)
        classes[0] = 0
        if len(item) == 0:
            return classes, 1
        pairs = np.unique(np.stack([attr, item]), axis=1)  # distinct (attribute, item)
        ids, counts = np.unique(pairs[0], return_counts=True)
        count = counts[np.searchsorted(ids, attr)]
        ok = count <= max_share * n_items
        item, attr, position, count = item[ok], attr[ok], position[ok], count[ok]
        if len(item) == 0:
            return classes, 1
        order = np.lexsort((position, -count, item))  # per item: most widespread, then earliest
        first = np.ones(len(order), bool)
        first[1:] = item[order][1:] != item[order][:-1]
        chosen_item, chosen_attr = item[order][first], attr[order][first]
        cats, n_per = np.unique(chosen_attr, return_counts=True)
        rank = np.lexsort((cats, -n_per))  # most items first, ties by id
        if max_classes > 0:
            rank = rank[: max(0, max_classes - 1)]  # one class is OTHER
        class_of = dict(
            zip(cats[rank].tolist(), range(OTHER + 1, OTHER + 1 + len(rank)), strict=True)
        )
        classes[chosen_item] = [class_of.get(a, OTHER) for a in chosen_attr.tolist()]
        return classes, len(rank) + 1


def genre_names(text: str | None) -> list[str]:
    """The category names of one item's ``|``-joined text, in order (MovieLens' "(no genres
    listed)" and empty names left out)."""
    if text is None:
        return []
    names = (g.strip() for g in str(text).split("|"))
    return [g for g in names if g and g != "(no genres listed)"]


def from_genres(items: dict | None) -> ItemAttributes | None:
    """Categories from a side table's ``genres`` column (``|``-joined names, as MovieLens), one
    attribute id per distinct genre name (sorted), kind ``"category"``; None without genres."""
    if not items or "genres" not in items or "item" not in items:
        return None
    ids, names = [], []
    for item, genres in zip(items["item"], items["genres"], strict=True):
        for g in genre_names(genres):
            ids.append(int(item))
            names.append(g)
    if not ids:
        return None
    vocab = {g: i + 1 for i, g in enumerate(sorted(set(names)))}
    item = np.asarray(ids, np.int64)
    position = np.zeros(len(item), np.int64)
    for i in range(1, len(item)):  # order within the item's own list
        position[i] = position[i - 1] + 1 if item[i] == item[i - 1] else 0
    return ItemAttributes(
        item,
        np.asarray([vocab[g] for g in names], np.int64),
        np.full(len(item), "category"),
        position,
    )
