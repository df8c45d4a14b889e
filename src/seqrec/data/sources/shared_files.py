"""Readers for the files of the project's shared data folder (``../shared/data``, see its
README): the ``*.tsv.xz`` sequence files made for seqrec, and the original GroupLens files
kept byte for byte.

The ``*.tsv.xz`` files are tab-separated with a header, one interaction per row, grouped by user
(or session) in ascending order and chronological within a user. Columns: ``user_id`` (or
``session_id``), ``item_id``, optionally ``timestamp`` (Unix seconds) and ``rating``. A file
without a ``timestamp`` column only carries the order: the loaded ``timestamp`` is then the row
number ``0..n-1`` and ``has_time`` is False, so a stable chronological sort keeps the order.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from seqrec.data.attributes import ItemAttributes
from seqrec.data.interactions import Interactions
from seqrec.data.sources import _io, movielens
from seqrec.errors import DataError

_DTYPES = {
    "user_id": pl.Int64,
    "session_id": pl.Int64,
    "item_id": pl.Int64,
    "timestamp": pl.Int64,
    "rating": pl.Float32,
}


def read_seq_tsv(path: str | Path, name: str, items: dict | None = None) -> Interactions:
    """A shared ``*.tsv.xz`` sequence file (see the module docstring)."""
    source = str(path)
    df = _io.read_table(_io.read_bytes(path), source, sep="\t", dtypes=_DTYPES)
    user_col = (
        "session_id" if "session_id" in df.columns and "user_id" not in df.columns else "user_id"
    )
    _io.require(df, (user_col, "item_id"), source)
    user, _ = _io.ids(df, user_col, source)
    item, _ = _io.ids(df, "item_id", source)
    ts = _io.seconds(df, "timestamp", source) if "timestamp" in df.columns else None
    rating = _io.numeric(df, "rating", source, pl.Float32) if "rating" in df.columns else None
    notes = (f"read {Path(path).name}",)
    if user_col == "session_id":
        notes += ("sessions are the users",)
    return _io.build(name, user, item, ts, rating=rating, items=items, notes=notes)


def read_seq_with_attributes(
    path: str | Path, name: str, attributes_path: str | Path | None = None
) -> Interactions:
    """A shared sequence file plus, when present, its ``*.item_attributes.tsv.xz`` table
    (item ids of the sequence file; see :mod:`seqrec.data.attributes`)."""
    inter = read_seq_tsv(path, name)
    if attributes_path is None:
        return inter
    att = read_item_attributes_tsv(attributes_path)
    return inter.replace(
        item_attributes=att,
        notes=inter.notes
        + (
            f"item attributes from {Path(attributes_path).name} ({len(att)} rows, kinds: "
            f"{', '.join(att.kinds())})",
        ),
    )


def read_ml1m_seq(path: str | Path, movies_path: str | Path | None = None) -> Interactions:
    """``ml-1m.seq.tsv.xz``: complete ML-1M in time order, ratings kept, no timestamps."""
    items = movielens.read_movies_dat(movies_path) if movies_path else None
    return read_seq_tsv(path, "ml-1m", items)


def read_ml1m_sasrec(path: str | Path, movies_path: str | Path | None = None) -> Interactions:
    """``ml-1m.sasrec-order.tsv.xz``: ML-1M 5-core in SASRec's exact order, no timestamps."""
    items = movielens.read_movies_dat(movies_path) if movies_path else None
    return read_seq_tsv(path, "ml-1m-sasrec", items)


def read_ml1m_ts(path: str | Path, movies_path: str | Path | None = None) -> Interactions:
    """``ml-1m.ratings.users0001-2999.dat.xz``: raw ``ratings.dat`` lines of users 1-2999,
    with timestamps (not time-ordered within a user: preprocessing sorts them)."""
    return movielens.read_ratings_dat(path, movies_path, name="ml-1m-ts")


def read_ml100k(path: str | Path, items_path: str | Path | None = None) -> Interactions:
    """``ml-100k.u.data.xz`` (+ ``ml-100k.u.item.xz``)."""
    return movielens.read_udata(path, items_path, name="ml-100k")


def read_latest_small_csv(path: str | Path, movies_path: str | Path | None = None) -> Interactions:
    """``ml-latest-small.ratings.csv.xz`` from the shared folder (same data as the shipped copy)."""
    return movielens.read_ratings_csv(path, movies_path, name="ml-latest-small")


def read_item_attributes_tsv(path: str | Path) -> ItemAttributes:
    """A shared ``*.item_attributes.tsv.xz`` file: columns ``item_id``, ``position``,
    ``attribute_id``, ``kind`` (see the shared data README)."""
    source = str(path)
    df = _io.read_table(
        _io.read_bytes(path),
        source,
        sep="\t",
        dtypes={
            "item_id": pl.Int64,
            "position": pl.Int64,
            "attribute_id": pl.Int64,
            "kind": pl.String,
        },
    )
    _io.require(df, ("item_id", "position", "attribute_id", "kind"), source)
    if df.null_count().sum_horizontal().item():
        raise DataError(f"{source}: empty cells in the item-attribute table")
    return ItemAttributes(
        df["item_id"].to_numpy(),
        df["attribute_id"].to_numpy(),
        df["kind"].to_numpy(),
        df["position"].to_numpy(),
    )
