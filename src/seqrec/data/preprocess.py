"""Preprocessing: dedup, implicit conversion, min-count / k-core filters, stable chronological
order, id remap to ``1..n`` (0 = PAD). Every step appends a note to ``Interactions.notes``."""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass

import numpy as np

from seqrec.data.interactions import Interactions
from seqrec.data.item_vectors import vectors_from_texts
from seqrec.data.sequences import Sequences
from seqrec.data.vocab import ItemVocab
from seqrec.errors import ConfigError, DataError


@dataclass(frozen=True)
class Prepared:
    """Preprocessed data: remapped interactions (users 0..U-1, items 1..n) and vocabularies."""

    interactions: Interactions
    vocab: ItemVocab
    user_raw: np.ndarray
    source_users: np.ndarray | None = None
    """Raw user ids before preprocessing (to tell a filtered user from an unknown one)."""

    @property
    def n_items(self) -> int:
        return len(self.vocab)

    @property
    def n_users(self) -> int:
        return len(self.user_raw)

    def sequences(self) -> Sequences:
        return to_sequences(self.interactions, self.n_items, self.vocab)

    def fingerprint(self) -> str:
        """sha256 (16 hex) of the processed arrays: identifies the exact data a result used.
        Computed once (train checks it against its run directory and records it)."""
        cached = self.__dict__.get("_fingerprint")
        if cached is None:
            h = hashlib.sha256()
            for arr in (
                self.interactions.user,
                self.interactions.item,
                self.interactions.timestamp,
            ):
                h.update(np.ascontiguousarray(arr).tobytes())
            cached = h.hexdigest()[:16]
            object.__setattr__(self, "_fingerprint", cached)
        return cached


# --- steps ------------------------------------------------------------------------------------
def chronological(inter: Interactions) -> Interactions:
    """Sort by (user, timestamp); ties keep file order (stable sort)."""
    order = np.lexsort((inter.timestamp, inter.user))  # lexsort is stable
    return inter.take(order, "sorted by (user, timestamp), ties keep file order (stable)")


def deduplicate(inter: Interactions) -> Interactions:
    """Keep the first (earliest, then file order) occurrence of each (user, item) pair."""
    order = np.lexsort((np.arange(len(inter)), inter.timestamp, inter.item, inter.user))
    u, i = inter.user[order], inter.item[order]
    first = np.ones(len(order), bool)
    first[1:] = (u[1:] != u[:-1]) | (i[1:] != i[:-1])
    keep = np.sort(order[first])
    return inter.take(
        keep, f"deduplicated (user, item) keeping the first: {len(inter) - len(keep)} removed"
    )


def implicit(inter: Interactions, min_rating: float | None) -> Interactions:
    """Keep interactions with ``rating >= min_rating`` (all when None); ratings become implicit."""
    if min_rating is None:
        return inter
    if inter.rating is None:
        raise DataError(f"min_rating={min_rating} needs a rating column, the data has none")
    return inter.take(inter.rating >= min_rating, f"implicit: kept rating >= {min_rating}")


def _counts(ids: np.ndarray) -> np.ndarray:
    """Occurrences of each row's id, per row. bincount when ids are dense enough (far faster
    than ``np.unique``, which sorts)."""
    if len(ids) and ids.min() >= 0 and ids.max() < 4 * len(ids) + 1024:
        return np.bincount(ids)[ids]
    _, inv, cnt = np.unique(ids, return_inverse=True, return_counts=True)
    return cnt[inv]


def min_count_filter(inter: Interactions, min_item: int = 5, min_user: int = 5) -> Interactions:
    """Single pass: drop items with < ``min_item`` interactions, then users with < ``min_user``
    (as in the LRURec paper; some users/items may end below the threshold)."""
    out = inter
    if min_item > 1:
        out = out.take(
            _counts(out.item) >= min_item, f"dropped items with < {min_item} interactions"
        )
    if min_user > 1 and len(out):
        out = out.take(
            _counts(out.user) >= min_user, f"dropped users with < {min_user} interactions"
        )
    return out


def empty_core_error(k: int, name: str) -> DataError:
    """The k-core filter left nothing: say so, and how to train on a small file anyway."""
    return DataError(
        f"{k}-core filtering removed every interaction of '{name}' (every user and item "
        f"must keep >= {k} interactions); for a small file lower the cut "
        f"(--set data.min_user=2 --set data.min_item=2) or switch the filter off "
        f"(--set data.filter=none)"
    )


def k_core(inter: Interactions, k: int = 5) -> Interactions:
    """Iterative k-core: repeat until every user and item has >= ``k`` interactions."""
    out, rounds = inter, 0
    while True:
        keep = (_counts(out.item) >= k) & (_counts(out.user) >= k)
        if keep.all():
            break
        if not keep.any():
            raise empty_core_error(k, inter.name)
        out = Interactions(
            out.user[keep],
            out.item[keep],
            out.timestamp[keep],
            None if out.rating is None else out.rating[keep],
            out.items,
            out.has_time,
            out.name,
            out.notes,
            out.item_attributes,
            user_raw=out.user_raw,
        )
        rounds += 1
    return out.replace(notes=out.notes + (f"iterative {k}-core ({rounds} rounds)",))


def remap(inter: Interactions) -> Prepared:
    """Users -> 0..U-1 and items -> 1..n in order of first appearance-free sorted raw id."""
    user_raw, users = np.unique(inter.user, return_inverse=True)
    if inter.user_raw is not None:  # string user ids: back to their original text
        user_raw = np.asarray(inter.user_raw, dtype=object)[user_raw]
    item_raw, items = np.unique(inter.item, return_inverse=True)
    titles = _side_column(inter.items, "title", item_raw)
    categories = _side_column(inter.items, "categories", item_raw)
    if categories is None:
        categories = _side_column(inter.items, "genres", item_raw)
    raw = item_raw
    if inter.items is not None and "raw_id" in inter.items:
        # sources with string ids store codes in `item` and the original text in `raw_id`
        raw = np.asarray(inter.items["raw_id"], dtype=object)[item_raw]
    notes = inter.notes + ("ids remapped: items 1..n, 0 = PAD",)
    vectors = (
        vectors_from_texts(_side_column(inter.items, "vector", item_raw), raw.tolist())
        if (inter.items is not None and "vector" in inter.items)
        else None
    )
    if vectors is not None:
        have = int((~np.isnan(vectors[:, 0])).sum())
        notes += (f"item vectors: {have} of {len(raw)} items have one ({vectors.shape[1]} values)",)
    attributes = None
    if inter.item_attributes is not None:  # re-keyed to 1..n; rows of dropped items go
        attributes = inter.item_attributes.remap(item_raw)
        notes += (
            f"item attributes re-keyed to internal ids: {len(attributes)} of "
            f"{len(inter.item_attributes)} rows kept",
        )
    remapped = Interactions(
        users.astype(np.int64),
        items.astype(np.int64) + 1,
        inter.timestamp,
        inter.rating,
        inter.items,
        inter.has_time,
        inter.name,
        notes,
        attributes,
    )
    vocab = ItemVocab(raw, titles, attributes, categories, vectors=vectors)
    return Prepared(remapped, vocab, user_raw)


def _side_column(items: dict[str, np.ndarray] | None, column: str, item_raw: np.ndarray):
    """``items[column]`` aligned to ``item_raw`` (None where an item has no row)."""
    if items is None or column not in items:
        return None
    side_ids = np.asarray(items["item"])
    values = np.asarray(items[column], dtype=object)
    order = np.argsort(side_ids)
    pos = np.clip(np.searchsorted(side_ids[order], item_raw), 0, len(order) - 1)
    found = side_ids[order][pos] == item_raw
    return np.where(found, values[order][pos], None)


def _removed_ids(before: Interactions, after_items: np.ndarray) -> np.ndarray:
    """Raw ids (as text) of the items of ``before`` that no longer occur in ``after_items``."""
    gone = np.setdiff1d(np.unique(before.item), np.unique(after_items))
    if before.items is not None and "raw_id" in before.items:
        return np.asarray(before.items["raw_id"], dtype=object)[gone].astype(str)
    return gone.astype(str)


def to_sequences(inter: Interactions, n_items: int, vocab: ItemVocab | None = None) -> Sequences:
    """CSR sequences of remapped, chronologically sorted interactions (users 0..U-1)."""
    if np.any(np.diff(inter.user) < 0):
        raise DataError("interactions must be sorted by user (call chronological() first)")
    n_users = int(inter.user.max()) + 1
    counts = np.bincount(inter.user, minlength=n_users)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return Sequences(
        offsets, inter.item, n_items, inter.timestamp, np.arange(n_users), vocab, inter.has_time
    )


@dataclass(frozen=True)
class PreprocessConfig:
    """How raw interactions become model input."""

    min_rating: float | None = None
    """Keep only ratings >= this (implicit conversion); None keeps everything."""
    dedup: bool = False
    """Drop repeated (user, item) pairs, keeping the first."""
    filter: str = "none"
    """'none', 'min_count' (single pass, items then users) or 'k_core' (iterative)."""
    min_item: int = 5
    """Threshold for items (min_count) or k for k_core."""
    min_user: int = 5
    """Threshold for users (min_count)."""

    def __post_init__(self) -> None:
        if self.filter not in ("none", "min_count", "k_core"):
            raise ConfigError(
                f"filter must be one of 'none', 'min_count', 'k_core', got {self.filter!r}"
            )
        if self.min_item < 1 or self.min_user < 1:
            raise ConfigError("min_item and min_user must be >= 1")


def kept_note(before: Interactions, after: Interactions, config: PreprocessConfig) -> str:
    """ "kept X of Y users, items and interactions", and where the filter dropped most users,
    the setting that suits logs of short sessions."""

    def part(what: str, a: int, b: int) -> str:
        return f"{a:,} of {b:,} {what}" + (f" ({100 * a / b:.0f}%)" if a < b else "")

    users_before, users_after = len(np.unique(before.user)), len(np.unique(after.user))
    note = "kept " + ", ".join(
        [
            part("users", users_after, users_before),
            part("items", len(np.unique(after.item)), len(np.unique(before.item))),
            part("interactions", len(after), len(before)),
        ]
    )
    if config.filter != "none" and 2 * users_after < users_before:
        name = (
            f"{config.min_item}-core"
            if config.filter == "k_core"
            else f"min_count (items >= {config.min_item}, users >= {config.min_user})"
        )
        note += (
            f"; the {name} filter dropped most users: for a log of short sessions "
            "set data.filter=min_count with data.min_user=2 and data.min_item=2, or data.filter=none"
        )
    return note


def preprocess(inter: Interactions, config: PreprocessConfig = PreprocessConfig()) -> Prepared:
    """Apply the configured steps in a fixed order and remap ids."""
    out = chronological(inter)
    out = implicit(out, config.min_rating)
    if config.dedup:
        out = deduplicate(out)
    if config.filter == "min_count":
        out = min_count_filter(out, config.min_item, config.min_user)
    elif config.filter == "k_core":
        out = k_core(out, config.min_item)
    if len(out) == 0:
        raise DataError(f"preprocessing removed every interaction of '{inter.name}'")
    out = out.replace(notes=out.notes + (kept_note(inter, out, config),))
    prepared = remap(out)
    removed = _removed_ids(inter, out.item)
    vocab = prepared.vocab
    if len(removed):
        vocab = dataclasses.replace(vocab, removed=removed)
    source = inter.user if inter.user_raw is None else np.asarray(inter.user_raw, dtype=object)
    return Prepared(prepared.interactions, vocab, prepared.user_raw, source)
