"""Any CSV / TSV / Parquet interaction file, with a column mapping.

``read_file("log.csv.gz", columns={"user": "userId", "item": "movieId", "timestamp": "ts"})``
reads the file by its extension (``.csv``, ``.tsv``/``.tab``, ``.txt``/``.dat`` (tab unless
``sep`` is given), ``.parquet``/``.pq``; text files may be ``.xz``/``.gz``/``.bz2``
compressed). Without a mapping, common names are recognised (``user_id``, ``userId``,
``session_id``, ``reviewerID``, ... see :data:`ALIASES`). Integer ids are kept; string ids are
factorized (item strings kept as ``items["raw_id"]``). Timestamps may be Unix seconds, floats
(floored), dates or datetimes (``time_format`` for text); ``timestamp_unit="ms"`` divides by
1000. A file without a timestamp column is refused unless ``columns={"timestamp": None}`` says
that its row order is the time order (then ``has_time=False`` and timestamp = row number).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import polars as pl

from seqrec.data.interactions import Interactions
from seqrec.data.sources import _io
from seqrec.errors import ConfigError, DataError

ROLES = ("user", "item", "timestamp", "rating")
ALIASES: dict[str, tuple[str, ...]] = {
    "user": ("user_id", "userId", "user", "userID", "UserID", "uid", "session_id", "sessionId",
             "session", "reviewerID", "username", "visitorid"),
    "item": ("item_id", "itemId", "item", "itemID", "movieId", "MovieID", "movie_id", "iid",
             "asin", "product_id", "productId", "business_id", "track_id", "artist_id"),
    "timestamp": ("timestamp", "Timestamp", "time", "ts", "unixReviewTime", "datetime", "date",
                  "event_time"),
    "rating": ("rating", "Rating", "overall", "stars", "score"),
}
TEXT_EXT = {".csv": ",", ".tsv": "\t", ".tab": "\t", ".txt": "\t", ".dat": "\t"}
PARQUET_EXT = (".parquet", ".pq")


def _frame(path: Path, sep: str | None, has_header: bool, names, columns) -> pl.DataFrame:
    plain, _ = _io.strip_compression(path)
    ext = Path(plain).suffix.lower()
    if ext in PARQUET_EXT:
        try:
            df = pl.read_parquet(path)
        except (pl.exceptions.PolarsError, OSError) as exc:
            raise DataError(f"cannot read parquet {path}: {_io._first_line(str(exc))}") from None
        if df.height == 0:
            raise DataError(f"file {path} has no rows")
        return df
    if ext not in TEXT_EXT and sep is None:
        raise DataError(
            f"cannot tell the format of {path.name}: expected .csv, .tsv, .txt, .dat or .parquet "
            "(optionally .xz/.gz/.bz2), or pass sep="
        )
    data = _io.read_bytes(path)
    sep = sep or TEXT_EXT[ext]
    present = list(names) if names else _header(data, sep, str(path))
    roles = _resolve(columns, present, str(path))
    # ids are read as text so that "0205616461" keeps its leading zero (see _io.ids)
    dtypes = {roles[r]: pl.String for r in ("user", "item")}
    return _io.read_table(data, str(path), sep=sep, header=has_header, names=names, dtypes=dtypes)


def _header(data: bytes, sep: str, source: str) -> list[str]:
    first = data.split(b"\n", 1)[0].rstrip(b"\r").decode("utf-8", "replace")
    return [c.strip('"') for c in first.split(sep)] if first.strip() else []


def _resolve(columns: Mapping[str, str | None] | None, present: list[str], source: str) -> dict[str, str]:
    columns = dict(columns or {})
    unknown = set(columns) - set(ROLES)
    if unknown:
        raise ConfigError(f"columns keys must be among {', '.join(ROLES)}, got {sorted(unknown)}")
    out = {}
    for role in ROLES:
        if role in columns:
            if columns[role] is None and role in ("timestamp", "rating"):
                continue  # explicitly absent
            if columns[role] not in present:
                raise DataError(f"{source} has no column '{columns[role]}' (mapped to {role}; "
                                f"columns present: {', '.join(present)})")
            out[role] = columns[role]
            continue
        found = next((c for c in ALIASES[role] if c in present), None)
        if found is None and role in ("user", "item"):
            raise DataError(
                f"{source}: no {role} column (columns present: {', '.join(present)}); "
                f"pass columns={{'{role}': '<name>'}} (or has_header=False, names=[...] for a "
                "file without a header line)"
            )
        if found is None and role == "timestamp" and "timestamp" not in columns:
            raise DataError(
                f"{source}: no timestamp column (columns present: {', '.join(present)}); pass "
                "columns={'timestamp': '<name>'}, or columns={'timestamp': None} if the rows are "
                "in time order and the file order should serve as time"
            )
        if found is not None:
            out[role] = found
    return out


def read_file(
    path: str | Path,
    columns: Mapping[str, str | None] | None = None,
    sep: str | None = None,
    has_header: bool = True,
    names: list[str] | None = None,
    time_format: str | None = None,
    timestamp_unit: str = "s",
    name: str | None = None,
) -> Interactions:
    """Read an interaction file by its extension.

    Args:
        path: a .csv/.tsv/.txt/.dat (optionally .xz/.gz/.bz2) or .parquet file.
        columns: role -> column name, roles ``user``, ``item``, ``timestamp``, ``rating``;
            missing roles are looked up among :data:`ALIASES`; ``"timestamp": None`` means
            "no time column, the rows are in time order", ``"rating": None`` ignores ratings.
        sep: field separator (default from the extension; ``::`` works).
        has_header: whether a text file has a header line; if not, give ``names``.
        names: column names for a file without a header.
        time_format: strftime format of a text timestamp column (default: ISO dates).
        timestamp_unit: ``"s"`` or ``"ms"`` for numeric timestamps.
        name: dataset name (default: the file name without extensions).
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"file not found: {path}")
    if timestamp_unit not in ("s", "ms"):
        raise ConfigError(f"timestamp_unit must be 's' or 'ms', got {timestamp_unit!r}")
    if not has_header and names is None:
        raise ConfigError("has_header=False needs names=[...] for the columns")
    source = str(path)
    df = _frame(path, sep, has_header, names, columns)
    roles = _resolve(columns, df.columns, source)
    user, _ = _io.ids(df, roles["user"], source, has_header)
    item, raw = _io.ids(df, roles["item"], source, has_header)
    ts = None
    if "timestamp" in roles:
        ts = _io.seconds(df, roles["timestamp"], source, time_format, has_header)
        if timestamp_unit == "ms" and df[roles["timestamp"]].dtype.is_numeric():
            ts = np.floor_divide(ts, 1000)
    rating = None
    if "rating" in roles:
        rating = _io.numeric(df, roles["rating"], source, pl.Float32, has_header)
    mapping = ", ".join(f"{r}={c}" for r, c in roles.items())
    return _io.build(name or path.name.split(".")[0], user, item, ts, rating=rating,
                     item_raw=raw, notes=(f"read {path.name} ({mapping})",))
