"""The preprocessed datasets shipped in the LRURec repository (Yue et al., WSDM 2024,
github.com/yueqirex/LRURec, ``data/preprocessed/<name>/dataset.pkl``): the data behind the
LRURec paper's Table 3.

Each ``dataset.pkl`` is a pickle of plain dicts and lists: ``train``, ``val`` and ``test`` map
the LRURec user index to its item indices (``val`` and ``test`` one item each), ``umap`` and
``smap`` map original user and item ids to those indices. The LRURec code builds each user's
sequence by sorting on ``(timestamp, item index)``, and its item index follows the original id,
so same-second ratings are in ascending MovieID order. That is not the order of SASRec's
``ml-1m.txt`` (``ml-1m-sasrec``: ties in ``ratings.dat`` line order): on ML-1M the two orders hold
the same interactions but agree on 48% of the positions and on 74% of the test items.

The pickle is read with an unpickler that refuses to construct any object (no class can be
looked up), so the file can only yield dicts, lists, numbers and strings.
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path

import numpy as np

from seqrec.data.interactions import Interactions
from seqrec.data.sources import _io
from seqrec.errors import DataError


class _PlainUnpickler(pickle.Unpickler):
    """Builds only the pickle protocol's own types: any class or function lookup is refused."""

    def find_class(self, module: str, name: str):  # noqa: D102 - pickle API
        raise DataError(
            f"refusing to load {module}.{name} from a data pickle: only plain "
            "dicts and lists are expected"
        )


def read_plain_pickle(path: str | Path):
    """Unpickle ``path`` without constructing any object (see :class:`_PlainUnpickler`)."""
    try:
        return _PlainUnpickler(io.BytesIO(_io.read_bytes(path, text=False))).load()
    except (pickle.UnpicklingError, EOFError, ValueError) as exc:
        raise DataError(f"cannot read {path} as a pickle: {type(exc).__name__}: {exc}") from None


def read_preprocessed_pkl(path: str | Path, name: str = "lrurec") -> Interactions:
    """One LRURec ``dataset.pkl`` as interactions with the original user and item ids, in
    LRURec's order: per user ``train + val + test``, users in ascending LRURec index. The
    interactions have no timestamps (the pickle holds only the order)."""
    data = read_plain_pickle(path)
    need = ("train", "val", "test", "umap", "smap")
    if not isinstance(data, dict) or any(k not in data for k in need):
        raise DataError(
            f"{path}: expected a dict with keys {', '.join(need)} (an LRURec "
            f"dataset.pkl), got {type(data).__name__}"
            + (f" with keys {sorted(data)[:8]}" if isinstance(data, dict) else "")
        )
    user_of = {v: k for k, v in data["umap"].items()}
    item_of = {v: k for k, v in data["smap"].items()}
    users, items = [], []
    for u in sorted(data["train"]):
        seq = list(data["train"][u]) + list(data["val"].get(u, [])) + list(data["test"].get(u, []))
        try:
            raw_user = user_of[u]
            raw_items = [item_of[i] for i in seq]
        except KeyError as exc:
            raise DataError(f"{path}: index {exc} is missing from umap/smap") from None
        users += [raw_user] * len(seq)
        items += raw_items
    if not users:
        raise DataError(f"{path}: no interactions")
    return _io.build(
        name,
        np.asarray(users, dtype=np.int64),
        np.asarray(items, dtype=np.int64),
        None,
        notes=(f"read {Path(path).name} (LRURec preprocessed pickle, plain data only)",),
    )
