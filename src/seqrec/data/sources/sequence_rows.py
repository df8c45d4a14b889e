"""Logs written one row per user with lists of items: the ``sasrec_format.csv`` of Meta's
generative-recommenders (HSTU) code, ``index,user_id,sequence_item_ids,sequence_ratings,
sequence_timestamps`` with quoted ``"1,2,3"`` lists, a pandas frame whose item column holds
Python lists (saved by ``to_csv`` as ``"[1, 2, 3]"``), JSON records with arrays. Such a table
becomes one row per interaction, the lists of a row exploded together, before the roles are
read like any other table's."""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from seqrec.data.sources.columns import ALIASES
from seqrec.errors import DataError

# Names of list columns, by role (a mapping names any other: columns={"item": "basket"}).
SEQUENCE_ALIASES: dict[str, tuple[str, ...]] = {
    "item": ("sequence_item_ids", "item_sequence", "item_seq", "item_ids", "items", "sequence"),
    "timestamp": ("sequence_timestamps", "timestamp_sequence", "timestamps", "times"),
    "rating": ("sequence_ratings", "rating_sequence", "ratings"),
}


def may_hold_lists(present: list[str], columns: Mapping[str, str | None] | None) -> bool:
    """Whether a table with these column names may be one row per user with lists (known
    before its values are read)."""
    mapped = (columns or {}).get("item")
    # a one-item name may hold lists too ("item_id": "[1, 2, 3]"): its values decide
    return (
        mapped in present
        if mapped
        else any(c in present for c in (*SEQUENCE_ALIASES["item"], *ALIASES["item"]))
    )


def _is_list_column(df: pl.DataFrame, col: str) -> bool:
    """A list dtype, or text whose values are comma-separated (``"1,2,3"``, ``"[1, 2]"``)."""
    dtype = df.schema[col]
    if isinstance(dtype, pl.List):
        return True
    if dtype != pl.String:
        return False
    values = df[col].drop_nulls().head(1000)
    return len(values) > 0 and bool(values.str.contains(",").any())


def _holds_lists(df: pl.DataFrame, col: str) -> bool:
    """A list dtype, or text whose every value is a bracketed list (``"[1, 2]"``): stricter than
    :func:`_is_list_column`, for columns whose name promises one id a row."""
    dtype = df.schema[col]
    if isinstance(dtype, pl.List):
        return True
    values = df[col].drop_nulls().head(1000)
    return (
        dtype == pl.String
        and len(values) > 0
        and bool(values.str.contains(r"^\s*\[.*\]\s*$").all())
    )


def _as_list(col: str) -> pl.Expr:
    return (
        pl.col(col)
        .str.strip_chars()
        .str.strip_chars("[]()")
        .str.split(",")
        .list.eval(pl.element().str.strip_chars().str.strip_chars("'\""))
    )


def explode(
    df: pl.DataFrame, columns: Mapping[str, str | None] | None, source: str
) -> tuple[pl.DataFrame, Mapping[str, str | None] | None, str | None]:
    """``df`` with one row per interaction when its item column holds lists (else unchanged),
    the column mapping to read it with, and a note (None when nothing was exploded)."""
    columns = dict(columns or {})
    mapped = columns.get("item")
    if mapped is not None:
        item = mapped if mapped in df.columns and _is_list_column(df, mapped) else None
    else:
        item = next(
            (c for c in SEQUENCE_ALIASES["item"] if c in df.columns and _is_list_column(df, c)),
            None,
        )
        if item is None:  # a list column under a one-item name ("item_id" holding [1, 2, 3])
            item = next(
                (c for c in ALIASES["item"] if c in df.columns and _holds_lists(df, c)), None
            )
    if item is None:
        return df, columns or None, None
    lists = {"item": item}
    for role in ("timestamp", "rating"):
        name = (
            columns.get(role)
            if role in columns
            else next((c for c in SEQUENCE_ALIASES[role] if c in df.columns), None)
        )
        if name is not None and name in df.columns and _is_list_column(df, name):
            lists[role] = name
    df = df.with_columns(_as_list(c) for c in lists.values() if df.schema[c] == pl.String)
    lengths = {role: df[c].list.len() for role, c in lists.items()}
    for role, n in lengths.items():
        differ = (n != lengths["item"]).fill_null(False)
        if differ.any():
            row = int(differ.arg_max())
            raise DataError(
                f"{source}: row {row + 1} lists {lengths['item'][row]} items in "
                f"'{item}' but {n[row]} values in '{lists[role]}': a row's lists "
                "must be as long as each other"
            )
    rows = df.height
    df = df.explode(list(lists.values()))
    for role, c in lists.items():
        columns[role] = c
    if "timestamp" not in lists and "timestamp" not in columns:
        columns["timestamp"] = None  # the order of a list is its user's time order
    with_what = ", ".join(lists.values())
    order = "" if "timestamp" in lists else "; the order of each list is its time order"
    return (
        df,
        columns,
        (
            f"one row per user with lists ({with_what}): {rows:,} rows exploded "
            f"into {df.height:,} interactions{order}"
        ),
    )
