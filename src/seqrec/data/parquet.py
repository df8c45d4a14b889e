"""Interaction logs larger than memory: a Parquet file or a (hive-)partitioned Parquet dataset,
preprocessed lazily with Polars.

:func:`scan` returns a ``polars.LazyFrame`` with the standard columns ``user``, ``item``,
``timestamp`` (Unix seconds), optionally ``rating``, and ``_row`` (the row's position in the
dataset: files in path order, rows in file order) that breaks timestamp ties as the file order
does. :func:`preprocess_lazy` runs the steps of :func:`seqrec.data.preprocess.preprocess`
(implicit conversion, dedup, min-count / iterative k-core, id remap, stable chronological
order) as Polars queries executed by the streaming engine, which reads the files in chunks:

* each filtering round collects only per-id counts (one row per user or item);
* a filter is a semi-join of the scan with the kept id sets, so the plan stays the same size
  however many rounds the k-core takes;
* only the final int columns of the kept interactions are materialized, sorted by
  (user, timestamp, file order).

The result equals ``preprocess(read_file(path))`` for integer ids (the test checks it); string
ids are numbered in sorted order of the strings (the eager reader factorizes them in order of
first appearance, so internal ids differ, not the data).
"""

from __future__ import annotations

import logging
from pathlib import Path

import polars as pl

from seqrec.data.interactions import Interactions
from seqrec.data.preprocess import Prepared, PreprocessConfig, empty_core_error
from seqrec.data.vocab import ItemVocab
from seqrec.errors import ConfigError, DataError

log = logging.getLogger(__name__)

ENGINE = "streaming"
PARQUET_EXT = (".parquet", ".pq")


def is_parquet(path: str | Path) -> bool:
    """A ``.parquet``/``.pq`` file, or a directory holding such files (partitioned dataset)."""
    p = Path(path).expanduser()
    if p.is_file():
        return p.suffix.lower() in PARQUET_EXT
    if p.is_dir():
        return any(f.suffix.lower() in PARQUET_EXT for f in p.rglob("*") if f.is_file())
    return False


class NeedsEagerRead(DataError):
    """The lazy path cannot read this dataset as asked (a text time column): the eager reader
    (:func:`seqrec.data.sources.load`), which parses dates, can."""


def scan(
    path: str | Path, columns: dict[str, str | None] | None = None, timestamp_unit: str = "auto"
) -> pl.LazyFrame:
    """Lazy ``user, item, timestamp[, rating], _row`` frame over a Parquet file or dataset
    (:func:`scan_roles` without the columns read)."""
    return scan_roles(path, columns, timestamp_unit)[0]


def scan_roles(
    path: str | Path, columns: dict[str, str | None] | None = None, timestamp_unit: str = "auto"
) -> tuple[pl.LazyFrame, dict[str, str], str]:
    """Lazy ``user, item, timestamp[, rating], _row`` frame over a Parquet file or dataset,
    the column read for each role, and the time unit used.

    Args:
        path: a Parquet file, or a directory of them (``key=value`` folders become columns).
        columns: role -> column name (roles ``user``, ``item``, ``timestamp``, ``rating``);
            missing roles are looked up among the common names of
            :data:`seqrec.data.sources.columns.ALIASES`.
        timestamp_unit: ``"s"``, ``"ms"``, ``"us"`` or ``"ns"`` for numeric time columns;
            ``"auto"`` (default) reads seconds unless the largest value only makes sense in a
            finer unit (one streaming pass over that column; as the eager reader does).
    """
    from seqrec.data.sources.columns import resolve_columns

    p = Path(path).expanduser()
    if not is_parquet(p):
        raise DataError(f"{path} is neither a .parquet file nor a directory of Parquet files")
    if timestamp_unit not in LAZY_UNITS:
        raise ConfigError(
            f"timestamp_unit must be one of {', '.join(LAZY_UNITS)}, got {timestamp_unit!r}"
        )
    source = str(p)
    if p.is_dir():
        lf = pl.scan_parquet(p, hive_partitioning=True)
    else:
        lf = pl.scan_parquet(p)
    schema = lf.collect_schema()
    roles = resolve_columns(columns, list(schema.names()), source)
    if "timestamp" not in roles:
        raise DataError(
            f"{source}: a Parquet dataset needs a timestamp column (its row order "
            "across files is not a time order)"
        )
    time_col = roles["timestamp"]
    if schema[time_col] == pl.String:
        raise NeedsEagerRead(f"{source}: column '{time_col}' holds text times")
    if timestamp_unit == "auto":
        timestamp_unit = _implied_unit(lf, schema, time_col)
    exprs = [
        _id(schema, roles["user"], "user", source),
        _id(schema, roles["item"], "item", source),
        _seconds(schema, time_col, source, timestamp_unit),
    ]
    if "rating" in roles:
        exprs.append(pl.col(roles["rating"]).cast(pl.Float32).alias("rating"))
    return (
        lf.with_row_index("_row").select(pl.col("_row").cast(pl.Int64), *exprs),
        roles,
        timestamp_unit,
    )


def _id(schema, col: str, role: str, source: str) -> pl.Expr:
    dtype = schema[col]
    if dtype.is_integer():
        return pl.col(col).cast(pl.Int64).alias(role)
    if dtype == pl.String or isinstance(dtype, (pl.Categorical, pl.Enum)):
        return pl.col(col).cast(pl.String).alias(role)
    raise DataError(
        f"{source}: column '{col}' ({role}) must hold integer or string ids, got {dtype}"
    )


LAZY_UNITS = ("auto", "s", "ms", "us", "ns")


def _implied_unit(lf: pl.LazyFrame, schema, col: str) -> str:
    """The unit of a numeric time column by its largest value, as the eager reader decides it
    (:func:`seqrec.data.sources.time_units.implied_unit`; one streaming pass over the column)."""
    from seqrec.data.sources.time_units import implied_unit

    if not (schema[col].is_integer() or schema[col].is_float()):
        return "s"
    low, top = (
        lf.select(pl.col(col).abs().min().alias("low"), pl.col(col).abs().max().alias("top"))
        .collect(engine=ENGINE)
        .row(0)
    )
    if top is None:
        return "s"
    if implied_unit(low) != implied_unit(top):  # mixed units: the eager reader names the rows
        raise NeedsEagerRead(f"{col!r} mixes numbers of different time units")
    return implied_unit(top)


def _seconds(schema, col: str, source: str, unit: str) -> pl.Expr:
    dtype = schema[col]
    c = pl.col(col)
    from seqrec.data.sources.time_units import PER_SECOND

    per = PER_SECOND[unit]
    if dtype.is_integer():
        expr = c.cast(pl.Int64)
        expr = expr.floordiv(per) if per > 1 else expr
    elif dtype.is_float():
        expr = (c.floordiv(per) if per > 1 else c.floor()).cast(pl.Int64)
    elif dtype == pl.Date:
        expr = c.cast(pl.Datetime("ms")).dt.epoch("s")
    elif isinstance(dtype, pl.Datetime):
        expr = c.dt.epoch("s")
    else:
        raise DataError(
            f"{source}: column '{col}' must hold a time (integer/float Unix time, "
            f"Date or Datetime), got {dtype}"
        )
    return expr.alias("timestamp")


def _check(lf: pl.LazyFrame, source: str) -> tuple[pl.LazyFrame, int, list[str]]:
    """One streaming pass: row count, nulls, negative times. Rows with an empty user, item or
    time are skipped with a warning and a note when they are fewer than half (as the eager
    reader does: an export's guest checkouts); more, or an empty rating, is an error."""
    cols = lf.collect_schema().names()
    key = ("user", "item", "timestamp")
    stats = lf.select(
        pl.len().alias("_n"),
        *[pl.col(c).null_count().alias(c) for c in cols],
        pl.any_horizontal([pl.col(c).is_null() for c in key]).sum().alias("_rows"),
        (pl.col("timestamp") < 0).sum().alias("_neg"),
    ).collect(engine=ENGINE)
    n = int(stats["_n"][0])
    if n == 0:
        raise DataError(f"dataset '{source}' is empty: no interactions")
    nulls = [c for c in cols if int(stats[c][0])]
    empty_rows = int(stats["_rows"][0])
    notes = []
    if nulls and (2 * empty_rows >= n or any(c not in key for c in nulls)):
        raise DataError(f"{source}: null values in column(s) {', '.join(nulls)}")
    if empty_rows:
        by_col = ", ".join(f"{c} {int(stats[c][0])}" for c in key if int(stats[c][0]))
        notes.append(
            f"{empty_rows:,} of {n:,} rows skipped: an empty user, item or time ({by_col})"
        )
        log.warning("%s: %s", source, notes[-1])
        lf = lf.filter(pl.all_horizontal([pl.col(c).is_not_null() for c in key]))
        n -= empty_rows
    if int(stats["_neg"][0]):
        raise DataError(f"{source}: column 'timestamp' has {int(stats['_neg'][0])} negative values")
    return lf, n, notes


def _counts(lf: pl.LazyFrame, col: str) -> pl.LazyFrame:
    return lf.group_by(col).agg(pl.len().alias("n"))


def _kept(lf: pl.LazyFrame, users: pl.DataFrame, items: pl.DataFrame) -> pl.LazyFrame:
    return lf.join(items.lazy(), on="item", how="semi").join(users.lazy(), on="user", how="semi")


def preprocess_lazy(
    lf: pl.LazyFrame,
    config: PreprocessConfig = PreprocessConfig(),
    name: str = "parquet",
    read_notes: tuple[str, ...] = (),
) -> Prepared:
    """:func:`seqrec.data.preprocess.preprocess` over a lazy frame from :func:`scan`
    (``read_notes``: how it was read, first among the notes)."""
    lf, n_rows, skipped = _check(lf, name)
    notes = [*read_notes, f"scanned {n_rows:,} rows lazily (Polars streaming engine)", *skipped]
    if config.min_rating is not None:
        if "rating" not in lf.collect_schema().names():
            raise DataError(
                f"min_rating={config.min_rating} needs a rating column, the data has none"
            )
        lf = lf.filter(pl.col("rating") >= config.min_rating)
        notes.append(f"implicit: kept rating >= {config.min_rating}")
    if config.dedup:
        first = lf.group_by("user", "item").agg(pl.col("_row").sort_by("timestamp", "_row").first())
        lf = lf.join(first.select("_row"), on="_row", how="semi")
        notes.append("deduplicated (user, item) keeping the first")
    users, items = pl.collect_all([_counts(lf, "user"), _counts(lf, "item")], engine=ENGINE)
    if config.filter == "min_count":
        if config.min_item > 1:
            items = items.filter(pl.col("n") >= config.min_item)
            users = _counts(lf.join(items.lazy(), on="item", how="semi"), "user").collect(
                engine=ENGINE
            )
            notes.append(f"dropped items with < {config.min_item} interactions")
        if config.min_user > 1:
            users = users.filter(pl.col("n") >= config.min_user)
            notes.append(f"dropped users with < {config.min_user} interactions")
            # items whose every interaction went with a dropped user leave the catalogue
            items = _counts(_kept(lf, users.select("user"), items.select("item")), "item").collect(
                engine=ENGINE
            )
    elif config.filter == "k_core":
        k, rounds = config.min_item, 0
        while True:
            keep_u, keep_i = users.filter(pl.col("n") >= k), items.filter(pl.col("n") >= k)
            if keep_u.height == users.height and keep_i.height == items.height:
                break
            if keep_u.height == 0 or keep_i.height == 0:
                raise empty_core_error(k, name)
            cur = _kept(lf, keep_u.select("user"), keep_i.select("item"))
            users, items = pl.collect_all(
                [_counts(cur, "user"), _counts(cur, "item")], engine=ENGINE
            )
            rounds += 1
        notes.append(f"iterative {k}-core ({rounds} rounds)")
    if users.height == 0 or items.height == 0:
        raise DataError(f"preprocessing removed every interaction of '{name}'")
    user_map = users.select("user").sort("user").with_row_index("uid")
    item_map = items.select("item").sort("item").with_row_index("iid", offset=1)
    cols = ["uid", "iid", "timestamp"] + (
        ["rating"] if "rating" in lf.collect_schema().names() else []
    )
    final = (
        _kept(lf, user_map.select("user"), item_map.select("item"))
        .join(user_map.lazy(), on="user")
        .join(item_map.lazy(), on="item")
        .sort("uid", "timestamp", "_row")
        .select(*cols)
        .collect(engine=ENGINE)
    )
    notes += [
        "sorted by (user, timestamp), ties keep file order (stable)",
        "ids remapped: items 1..n, 0 = PAD",
    ]
    inter = Interactions(
        user=final["uid"].cast(pl.Int64).to_numpy(),
        item=final["iid"].cast(pl.Int64).to_numpy(),
        timestamp=final["timestamp"].to_numpy(),
        rating=final["rating"].to_numpy() if "rating" in final.columns else None,
        name=name,
        notes=tuple(notes),
    )
    vocab_raw = item_map["item"].to_numpy()
    if vocab_raw.dtype.kind not in "iu":
        vocab_raw = vocab_raw.astype(object)
    log.info(
        "%s: %d interactions, %d users, %d items after preprocessing",
        name,
        len(inter),
        user_map.height,
        item_map.height,
    )
    return Prepared(inter, ItemVocab(vocab_raw), user_map["user"].to_numpy())


def prepare_parquet(
    path: str | Path,
    config: PreprocessConfig = PreprocessConfig(),
    columns: dict[str, str | None] | None = None,
    timestamp_unit: str = "auto",
) -> Prepared:
    """``preprocess_lazy(scan(path))``: read and preprocess without loading the log whole."""
    name = Path(path).name.split(".")[0] or "parquet"
    from seqrec.data.sources.time_units import unit_note

    lf, roles, unit = scan_roles(path, columns, timestamp_unit)
    notes = [f"read {Path(path).name} ({', '.join(f'{r}={c}' for r, c in roles.items())})"]
    if unit_note(unit, timestamp_unit):
        notes.append(unit_note(unit, timestamp_unit))
    return preprocess_lazy(lf, config, name, tuple(notes))
