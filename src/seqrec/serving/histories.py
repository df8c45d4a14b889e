"""The training users' histories, stored with an artifact (``users.npz``) so that
``seqrec recommend ARTIFACT --user ID`` and the service can answer for a known user.

``users.npz`` holds NumPy arrays only (loaded with ``allow_pickle=False``): ``raw`` (user ids
as text), ``raw_kind`` (the dtype kind of the original ids), ``offsets`` int64 ``[U + 1]``,
``items`` int32 (internal item ids, oldest first: the whole preprocessed history, training,
validation and test items alike), ``times`` int64 (their Unix seconds, where the data had real
times) and ``removed`` (user ids, as text, that preprocessing
dropped, so that an unknown user can be told apart from a filtered one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from seqrec.errors import DataError
from seqrec.serving import text_arrays

FILE = "users.npz"


@dataclass(frozen=True)
class UserHistories:
    """Raw user id -> internal item ids (CSR)."""

    raw: np.ndarray
    offsets: np.ndarray
    items: np.ndarray
    removed: np.ndarray
    times: np.ndarray | None = None
    """Unix seconds of each stored item (aligned with ``items``), for models that read time;
    None when the data had no real times."""

    def __len__(self) -> int:
        return len(self.raw)

    @classmethod
    def from_prepared(cls, prepared: Any) -> UserHistories:
        """Histories of every user of ``prepared`` (a ``Prepared``), and the users that its
        preprocessing removed."""
        seqs = prepared.sequences()
        raw = np.asarray(prepared.user_raw)[np.asarray(seqs.users, dtype=np.int64)]
        removed = np.array([], dtype=str)
        if prepared.source_users is not None:
            before = np.unique(np.asarray(prepared.source_users).astype(str))
            removed = np.setdiff1d(before, np.asarray(prepared.user_raw).astype(str))
        times = (
            np.asarray(seqs.timestamps, np.int64)
            if seqs.timestamps is not None and seqs.has_time
            else None
        )
        return cls(
            raw,
            np.asarray(seqs.offsets, np.int64),
            np.asarray(seqs.items, np.int32),
            removed,
            times,
        )

    def __contains__(self, raw_id: Any) -> bool:
        return str(raw_id) in self._index()

    def _index(self) -> dict[str, int]:
        cache = self.__dict__.get("_lookup")
        if cache is None:
            cache = {str(r): i for i, r in enumerate(self.raw.tolist())}
            object.__setattr__(self, "_lookup", cache)
        return cache

    def internal(self, raw_ids: list[Any]) -> list[np.ndarray]:
        """Internal item ids of each user; any unknown user raises ``DataError`` naming it
        (and saying whether preprocessing removed it or it never occurred)."""
        index = self._index()
        missing = [u for u in raw_ids if str(u) not in index]
        if missing:
            removed = set(self.removed.tolist())
            gone = [u for u in missing if str(u) in removed]
            unseen = [u for u in missing if str(u) not in removed]
            parts = []
            if unseen:
                parts.append(f"never seen in the training data: {_show(unseen)}")
            if gone:
                parts.append(
                    f"removed by preprocessing (too few interactions after the "
                    f"filters): {_show(gone)}"
                )
            example = ", ".join(repr(r) for r in self.raw[:3].tolist())
            raise DataError(
                f"unknown user id(s): {'; '.join(parts)} (the artifact stores "
                f"{len(self)} users, e.g. {example})"
            )
        pos = [index[str(u)] for u in raw_ids]
        return [self.items[self.offsets[p] : self.offsets[p + 1]].astype(np.int64) for p in pos]

    def times_of(self, raw_ids: list[Any]) -> list[list[int]] | None:
        """Unix seconds of each user's stored items (None when none were stored)."""
        if self.times is None:
            return None
        index = self._index()
        pos = [index[str(u)] for u in raw_ids]
        return [self.times[self.offsets[p] : self.offsets[p + 1]].tolist() for p in pos]

    def raw_histories(self, raw_ids: list[Any], vocab: Any) -> list[list[Any]]:
        """Raw item ids of each user's stored history, oldest first."""
        return [list(vocab.decode(ids)) for ids in self.internal(raw_ids)]

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The arrays of ``users.npz`` (no object arrays: loadable without pickle)."""
        out = {
            **text_arrays.pack("raw", self.raw.tolist()),
            "raw_kind": np.array(self.raw.dtype.kind),
            "offsets": self.offsets,
            "items": self.items,
            **text_arrays.pack("removed", self.removed.tolist()),
        }
        if self.times is not None:
            out["times"] = np.asarray(self.times, np.int64)
        return out

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray], source: str = FILE) -> UserHistories:
        """Inverse of :meth:`to_arrays`; missing or inconsistent arrays raise ``DataError``."""
        try:
            # text columns packed (artifact format 3) or as NumPy text (formats 1-2)
            raw, removed = (
                text_arrays.unpack(arrays, key, source)
                if text_arrays.has(arrays, key)
                else arrays[key]
                for key in ("raw", "removed")
            )
            offsets, items, kind = arrays["offsets"], arrays["items"], str(arrays["raw_kind"])
        except KeyError as exc:
            raise DataError(f"{source}: no array {exc} (not a seqrec users file)") from None
        if offsets.ndim != 1 or len(offsets) != len(raw) + 1 or offsets[-1] != len(items):
            raise DataError(f"{source}: offsets do not match the users and items it holds")
        times = arrays.get("times")
        if times is not None and (times.shape != items.shape or times.dtype.kind not in "iu"):
            raise DataError(f"{source}: times do not match the items it holds")
        return cls(raw.astype(np.int64) if kind in "iu" else raw, offsets, items, removed, times)


def _show(ids: list[Any]) -> str:
    return ", ".join(repr(u) for u in ids[:10]) + (
        f" (+{len(ids) - 10} more)" if len(ids) > 10 else ""
    )
