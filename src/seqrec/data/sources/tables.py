"""Interactions from an in-memory table (a Polars or pandas DataFrame, a dict of columns, a list
of records or of tuples): the roles, time units and checks of the file readers, without a round
trip through a file."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import polars as pl

from seqrec.data.interactions import Interactions
from seqrec.data.sources import _io
from seqrec.data.sources.generic import table_interactions
from seqrec.data.sources.time_units import check_unit
from seqrec.errors import DataError


def read_frame(
    frame: Any,
    columns: Mapping[str, str | None] | None = None,
    time_format: str | None = None,
    timestamp_unit: str = "auto",
    name: str = "frame",
    item_file: str | Path | None = None,
    item_columns: Mapping[str, str] | None = None,
    events: list[str] | None = None,
) -> Interactions:
    """Interactions from an in-memory table: a Polars (also lazy) or pandas DataFrame, a dict of
    columns, a list of records (dicts), or a list of ``(user, item, time)`` tuples (also
    ``(user, item)`` and ``(user, item, rating, time)``).

    The same roles, aliases, time units and checks as :func:`.generic.read_file` (``columns``,
    ``timestamp_unit``, ...), so a log held in a notebook needs no round trip through a file.
    """
    check_unit(timestamp_unit)
    if isinstance(frame, pl.DataFrame):
        df = frame
    elif type(frame).__module__.split(".")[0] == "pandas":
        df = _from_pandas(frame)
    elif isinstance(frame, Mapping):
        df = _table(lambda: pl.DataFrame(dict(frame)), "the dict")
    elif isinstance(frame, pl.LazyFrame):
        df = frame.collect()
    elif isinstance(frame, (list, tuple)) and frame and all(isinstance(r, Mapping) for r in frame):
        df = _table(lambda: pl.DataFrame(list(frame)), "the records")  # [{"user": .., "item": ..}]
    elif (
        isinstance(frame, (list, tuple))
        and frame
        and all(isinstance(r, (list, tuple)) for r in frame)
    ):
        # [(user, item, time), ...]: the headerless layout (user, item[, rating], time)
        width = {len(r) for r in frame}
        names = _ROW_LAYOUTS.get(width.pop()) if len(width) == 1 else None
        if names is None:
            raise DataError(
                "rows as tuples must all be (user, item), (user, item, time) or (user, "
                "item, rating, time); pass dicts or a DataFrame for other layouts"
            )
        df = _table(lambda: pl.DataFrame(list(frame), schema=names, orient="row"), "the rows")
    else:
        raise DataError(
            f"expected a Polars or pandas DataFrame, a dict of columns, or a list of "
            f"records (dicts) or (user, item, time) tuples, got {type(frame).__name__}"
        )
    if df.height == 0:
        raise DataError(f"the {name} table has no rows")
    # has_header=False: a bad value is named by its row (1-based), there is no header line
    try:
        return table_interactions(
            df,
            f"the {name} table",
            name,
            f"read the {name} table",
            columns,
            False,
            time_format,
            timestamp_unit,
            item_file,
            item_columns,
            place="row",
            events=events,
        )
    except DataError as exc:  # a table has rows, not lines (the messages are the files')
        raise DataError(re.sub(r"\bat line (\d+)", r"at row \1 (1-based)", str(exc))) from None


_ROW_LAYOUTS = {
    2: ["user", "item"],
    3: ["user", "item", "timestamp"],
    4: ["user", "item", "rating", "timestamp"],
}


def _table(build: Any, what: str) -> pl.DataFrame:
    try:
        return build()
    except (pl.exceptions.PolarsError, TypeError, ValueError) as exc:
        raise DataError(f"cannot build a table from {what}: {_io._first_line(str(exc))}") from None


def _from_pandas(frame: Any) -> pl.DataFrame:
    """A pandas DataFrame as Polars. ``pl.from_pandas`` needs pyarrow (not a dependency) for
    any column that is not plain numpy: ``category`` (common for ids), nullable ``Int64``,
    pandas 3's ``str``, tz-aware datetimes; such columns go through Python objects instead."""
    try:
        return pl.from_pandas(frame)
    except ImportError:
        cols = {}
        for name in frame.columns:
            col = frame[name]
            if isinstance(col.dtype, np.dtype) and col.dtype != object:
                series = pl.Series(str(name), col.to_numpy())
                # NaN is pandas' missing value (a float id column with blanks: Online Retail's
                # CustomerID); null, as pl.from_pandas makes it, so such rows are skipped
                cols[str(name)] = series.fill_nan(None) if series.dtype.is_float() else series
            else:
                values = col.astype(object)
                cols[str(name)] = pl.Series(
                    str(name), values.where(values.notna(), None).tolist(), strict=False
                )
        return pl.DataFrame(cols)
