"""Any CSV / TSV / Parquet interaction file, with a column mapping.

``read_file("log.csv.gz", columns={"user": "userId", "item": "movieId", "timestamp": "ts"})``
reads the file by its extension (``.csv``, ``.tsv``/``.tab``, ``.txt``/``.dat`` (tab unless
``sep`` is given), ``.parquet``/``.pq``; text files may be ``.xz``/``.gz``/``.bz2``
compressed). Without ``sep``, a header that is one field at the extension's separator while
every one of the first lines splits alike at ``;``, tab or ``|`` selects that separator; a first
line of numbers and dates only is data, read as ``user, item[, rating], time`` (MovieLens'
layout). Both guesses are among the notes. Without a mapping, common names are recognised (``user_id``, ``userId``,
``session_id``, ``reviewerID``, ... see :data:`ALIASES`), then names that contain a role's
word when only one column does (``CustomerID``, ``StockCode``, ``InvoiceDate``: see
:data:`KEYWORDS`; the mapping read is among the notes, and ``seqrec data describe`` shows it).
Integer ids are kept; string ids are
factorized (item strings kept as ``items["raw_id"]``). Timestamps may be Unix seconds, floats
(floored), dates or datetimes (``time_format`` for text); ``timestamp_unit="ms"`` / ``"us"`` /
``"ns"`` divide by 10^3 / 10^6 / 10^9, ``"iso"`` requires text dates. The default, ``"auto"``,
reads numbers as seconds unless only a finer unit makes sense of them (past the year 5000 as
seconds: milliseconds, microseconds or nanoseconds by their size; a note says so); an explicit
``"s"`` refuses such numbers with a hint. A file without a
timestamp column is refused unless ``columns={"timestamp": None}`` says that its row order is
the time order (then ``has_time=False`` and timestamp = row number).

``item_file=`` adds an item-metadata table (an item id column plus ``title`` and/or
``categories``, see :func:`read_items`); its titles and categories travel into the vocabulary
of a trained model and are shown by ``seqrec recommend`` and the HTTP service.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import polars as pl

from seqrec.data.interactions import Interactions
from seqrec.data.sources import _io, sequence_rows
from seqrec.data.sources.columns import (
    ITEM_ALIASES,
    ITEM_ROLES,
    ignored_note,
    keep_events,
    resolve_columns,
)
from seqrec.data.sources.layouts import (
    SEP_NAMES,
    header_names,
    headerless_names,
    is_user_item_lists,
    separator_hint,
    sniff_separator,
    strip_header,
    user_item_lists,
)
from seqrec.data.sources.time_units import (
    PER_SECOND,
    UNIT_WORDS,
    check_unit,
    implied_unit,
    mixed_units,
    mixed_units_message,
    unit_note,
)
from seqrec.errors import ConfigError, DataError

log = logging.getLogger(__name__)

# .inter: RecBole's atomic interaction file (tab-separated, a "name:type" header; its item
# file, .item, is read by read_items)
TEXT_EXT = {
    ".csv": ",",
    ".tsv": "\t",
    ".tab": "\t",
    ".txt": "\t",
    ".dat": "\t",
    ".data": "\t",
    ".inter": "\t",
}
PARQUET_EXT = (".parquet", ".pq")
EXCEL_EXT = (".xlsx", ".xlsm")


def _frame(
    path: Path, sep: str | None, has_header: bool, names, columns
) -> tuple[pl.DataFrame, bool, list[str], Mapping[str, str | None] | None]:
    """The table of ``path``, whether it had a header line, what was guessed about its layout
    (for the notes: a guess is always shown) and the column mapping to read it with."""
    plain, _ = _io.strip_compression(path)
    ext = Path(plain).suffix.lower()
    if ext in PARQUET_EXT:
        try:
            df = pl.read_parquet(path)
        except (pl.exceptions.PolarsError, OSError) as exc:
            raise DataError(f"cannot read parquet {path}: {_io._first_line(str(exc))}") from None
        if df.height == 0:
            raise DataError(f"file {path} has no rows")
        return df, has_header, [], columns
    if ext in EXCEL_EXT and sep is None:
        df, sheet = _excel(path)
        if not has_header:
            raise DataError(
                f"{path.name}: a spreadsheet is read with its first row as the column "
                "names; add a header row"
            )
        return df, True, [sheet] if sheet else [], columns
    if ext not in TEXT_EXT and sep is None:
        spreadsheet = " (a spreadsheet: save it as CSV)" if ext in (".xlsx", ".xls", ".ods") else ""
        raise DataError(
            f"cannot tell the format of {path.name}{spreadsheet}: expected .csv, .tsv, .txt, .dat, "
            ".inter (RecBole), .parquet or .xlsx (text optionally .xz/.gz/.bz2), or pass sep="
        )
    data = _io.read_bytes(path)
    guessed = []
    if b"\r" in data and b"\n" not in data:  # classic Mac OS line endings: one "line" otherwise
        data = data.replace(b"\r", b"\n")
        guessed.append("lines ended by CR alone (classic Mac OS)")
    if sep is None and has_header and names is None and not columns and is_user_item_lists(data):
        return (
            user_item_lists(data, str(path)),
            False,
            ["one user a line, then the user's items in time order (S3-Rec's layout)"],
            None,
        )
    if sep is None:
        sep = sniff_separator(data, TEXT_EXT[ext])
        if sep != TEXT_EXT[ext]:
            guessed.append(f"{SEP_NAMES.get(sep, sep)}-separated")
    if has_header and names is None:
        data, typed = strip_header(data, sep)
        if typed is not None:
            guessed.append("RecBole atomic header (name:type): types dropped")
    if has_header and names is None and not columns:
        names = headerless_names(header_names(data, sep, str(path)))
        if names is not None:
            has_header = False
            guessed.append("no header line, columns taken as " + ",".join(names))
        if names == ["user", "item"]:
            # headerless user-item pairs: the data files of SASRec and BERT4Rec list each
            # user's items in time order, with no time column
            columns = {"timestamp": None}
            guessed.append("no time column: the file order is the time order")
    present = list(names) if names else header_names(data, sep, str(path))
    try:
        roles = resolve_columns(columns, present, str(path))
    except DataError:
        hint = separator_hint(present, sep)
        if hint:
            raise DataError(f"{path}: {hint}") from None
        if not sequence_rows.may_hold_lists(present, columns):
            raise
        roles = None  # lists of items per row: the roles are read after they are exploded
    # ids are read as text so that "0205616461" keeps its leading zero (see _io.ids)
    dtypes = {roles[r]: pl.String for r in ("user", "item")} if roles else {}
    df = _io.read_table(data, str(path), sep=sep, header=has_header, names=names, dtypes=dtypes)
    return df, has_header, guessed, columns


def _excel(path: Path) -> tuple[pl.DataFrame, str]:
    """The first sheet of an ``.xlsx`` workbook (its first row the column names) with openpyxl,
    an optional dependency (the ``excel`` extra); and a note naming the sheet when there are
    several. Excel keeps numbers as floats: whole-number ids read as integers (``_io.ids``)."""
    try:
        import openpyxl
    except ImportError:
        raise DataError(
            f"{path.name} is a spreadsheet: save it as CSV, or install openpyxl "
            "(pip install openpyxl, or seqrec's 'excel' extra) to read .xlsx directly"
        ) from None
    try:
        book = openpyxl.load_workbook(path, read_only=True)
        sheets = list(book.sheetnames)
        book.close()
        df = pl.read_excel(path, engine="openpyxl", sheet_id=1)
    except pl.exceptions.NoDataError:
        raise DataError(f"{path.name}: its first sheet is empty") from None
    except Exception as exc:  # noqa: BLE001 - openpyxl raises many types for a damaged file
        raise DataError(
            f"cannot read {path.name} as an Excel workbook: {type(exc).__name__}: "
            f"{_io._first_line(str(exc))}"
        ) from None
    note = f"sheet '{sheets[0]}', the first of {len(sheets)}" if len(sheets) > 1 else ""
    return df, note


def read_file(
    path: str | Path,
    columns: Mapping[str, str | None] | None = None,
    sep: str | None = None,
    has_header: bool = True,
    names: list[str] | None = None,
    time_format: str | None = None,
    timestamp_unit: str = "auto",
    name: str | None = None,
    item_file: str | Path | None = None,
    item_columns: Mapping[str, str] | None = None,
    events: Sequence[str] | None = None,
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
        timestamp_unit: ``"auto"`` (seconds unless their size implies a finer unit), ``"s"``,
            ``"ms"``, ``"us"`` or ``"ns"`` for numeric timestamps, ``"iso"`` for text dates only
            (the others accept dates too).
        name: dataset name (default: the file name without extensions).
        item_file: optional item-metadata file (see :func:`read_items`).
        item_columns: role -> column of ``item_file`` (``item``, ``title``, ``categories``).
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"file not found: {path}")
    check_unit(timestamp_unit)
    if not has_header and names is None:
        raise ConfigError("has_header=False needs names=[...] for the columns")
    df, has_header, guessed, columns = _frame(path, sep, has_header, names, columns)
    note = f"read {path.name}" + "".join(f" [{g}]" for g in guessed)
    return table_interactions(
        df,
        str(path),
        name or path.name.split(".")[0],
        note,
        columns,
        has_header,
        time_format,
        timestamp_unit,
        item_file,
        item_columns,
        events=events,
    )


def read_parts(
    folder: str | Path,
    columns: Mapping[str, str | None] | None = None,
    sep: str | None = None,
    has_header: bool = True,
    names: list[str] | None = None,
    time_format: str | None = None,
    timestamp_unit: str = "auto",
    name: str | None = None,
    item_file: str | Path | None = None,
    item_columns: Mapping[str, str] | None = None,
    events: Sequence[str] | None = None,
) -> Interactions:
    """A folder of part files of one log (Spark / Hive / Dask output: ``part-00000.parquet``,
    monthly ``.csv`` exports), read as one file in name order: every part of one format
    (``.csv`` / ``.tsv`` / ``.txt`` / ``.dat`` / ``.parquet``, optionally compressed) and the
    same columns; hidden files and ``_SUCCESS``-style markers are ignored. The options are
    :func:`read_file`'s, applied to each part. A bad value is named by its part and line."""
    check_unit(timestamp_unit)
    folder = Path(folder)
    parts = [
        p for p in sorted(folder.iterdir()) if p.is_file() and not p.name.startswith((".", "_"))
    ]
    kinds = {_part_kind(p) for p in parts}
    if not parts or None in kinds:
        other = sorted(p.name for p in parts if _part_kind(p) is None)[:3]
        raise DataError(
            f"{folder} holds no MovieLens ratings file (u.data, ratings.dat, ratings.csv) "
            "and is not a folder of part files of one log (.csv, .tsv, .parquet, ...)"
            + (f": it also holds {', '.join(other)}" if other else ": it is empty")
        )
    if len(kinds) > 1:
        raise DataError(f"{folder} mixes part formats ({', '.join(sorted(kinds))}): keep one")
    frames, guessed, ends = [], set(), []
    for part in parts:
        df, has_header_part, g, _ = _frame(part, sep, has_header, names, columns)
        frames.append(df)
        guessed.update(g)
        ends.append((ends[-1] if ends else 0) + df.height)
    if all(set(f.columns) == set(frames[0].columns) for f in frames):  # same columns, any order
        frames = [f.select(frames[0].columns) for f in frames]
    try:
        df = pl.concat(frames, how="vertical_relaxed")
    except pl.exceptions.PolarsError:
        differ = next(
            p.name for p, f in zip(parts, frames, strict=True) if f.columns != frames[0].columns
        )
        raise DataError(
            f"{folder}: {differ} has other columns than {parts[0].name} "
            f"({', '.join(frames[0].columns)}): the parts of one log share them"
        ) from None
    note = (
        f"read {len(parts)} part files of {folder.name}/ ({parts[0].name} .. {parts[-1].name})"
        + "".join(f" [{g}]" for g in sorted(guessed))
    )
    try:
        return table_interactions(
            df,
            str(folder),
            name or folder.name,
            note,
            columns,
            has_header_part,
            time_format,
            timestamp_unit,
            item_file,
            item_columns,
            events=events,
        )
    except DataError as exc:  # "line N" of the joined table -> the part and its own line
        raise DataError(_part_line(str(exc), parts, ends, has_header_part)) from None


def _part_kind(path: Path) -> str | None:
    plain, _ = _io.strip_compression(path)
    ext = Path(plain).suffix.lower()
    return (
        ("parquet" if ext in PARQUET_EXT else ext)
        if ext in TEXT_EXT or ext in PARQUET_EXT
        else None
    )


def _part_line(message: str, parts: list[Path], ends: list[int], has_header: bool) -> str:
    match = re.search(r"\bline (\d+)", message)
    if match is None:
        return message
    row = int(match.group(1)) - 1 - int(has_header)  # 0-based row of the joined table
    i = next((j for j, end in enumerate(ends) if row < end), len(ends) - 1)
    local = row - (ends[i - 1] if i else 0) + 1 + int(has_header)
    return message[: match.start()] + f"line {local} of {parts[i].name}" + message[match.end() :]


def read_json(
    path: str | Path,
    columns: Mapping[str, str | None] | None = None,
    time_format: str | None = None,
    timestamp_unit: str = "auto",
    name: str | None = None,
    item_file: str | Path | None = None,
    item_columns: Mapping[str, str] | None = None,
    events: Sequence[str] | None = None,
) -> Interactions:
    """A JSON file of flat records, one per interaction: JSON lines (``.jsonl``, one object a
    line) or one array of objects (``.json``); optionally compressed. Keys play the columns'
    part, with the same roles, aliases and options as :func:`read_file`; nested objects become
    dotted columns (``properties.product_id``), lists stay values and cannot be ids)."""
    path = Path(path)
    check_unit(timestamp_unit)
    data = _io.read_bytes(path)  # refuses a missing, empty or binary file
    array = data.lstrip()[:1] == b"["
    try:
        df = pl.read_json(data) if array else pl.read_ndjson(data)
    except pl.exceptions.PolarsError as exc:
        if not array:
            _io.check_json_lines(data, str(path))
        raise DataError(
            f"{path}: cannot read it as {'a JSON array of records' if array else 'JSON lines'}: "
            f"{_io._first_line(str(exc))}"
        ) from None
    if df.height == 0:
        raise DataError(f"file {path} has no records")
    df = _flatten(df)
    # has_header=False: a bad value is named by its record (1-based: the line of JSON lines)
    return table_interactions(
        df,
        str(path),
        name or path.name.split(".")[0],
        f"read {path.name}",
        columns,
        False,
        time_format,
        timestamp_unit,
        item_file,
        item_columns,
        events=events,
    )


def _flatten(df: pl.DataFrame) -> pl.DataFrame:
    """Nested records as dotted columns: ``{"user": {"id": 7}, "properties": {"sku": "a"}}``
    (an analytics export) gives ``user.id`` and ``properties.sku``, which a mapping can name
    and the column guesses can find."""
    while any(isinstance(dtype, pl.Struct) for dtype in df.dtypes):
        for name, dtype in zip(df.columns, df.dtypes, strict=True):
            if isinstance(dtype, pl.Struct):
                fields = [f.name for f in dtype.fields]
                df = df.with_columns(
                    pl.col(name).struct.rename_fields([f"{name}.{f}" for f in fields])
                ).unnest(name)
                break
    return df


def table_interactions(
    df: pl.DataFrame,
    source: str,
    name: str,
    read_note: str,
    columns,
    has_header,
    time_format,
    timestamp_unit,
    item_file,
    item_columns,
    place: str = "line",
    events: Sequence[str] | None = None,
) -> Interactions:
    """The roles of ``df`` as :class:`Interactions` (shared by files and in-memory tables;
    ``place`` names a position in the source: a file's "line", a table's "row"; ``events``
    keeps the rows whose event column holds one of those kinds)."""
    df, columns, exploded = sequence_rows.explode(df, columns, source)
    columns = dict(columns or {})
    event_col = columns.pop("event", None)
    kept_events = None
    if events:
        df, kept_events, event_col = keep_events(df, events, event_col, source)
    roles = resolve_columns(columns or None, [c for c in df.columns if c != event_col], source)
    df, skipped = _without_incomplete_rows(df, roles, source, has_header, place)
    user, user_raw = _io.ids(df, roles["user"], source, has_header)
    item, raw = _io.ids(df, roles["item"], source, has_header)
    ts, used = None, "s"
    if "timestamp" in roles:
        ts, used = _timestamps(
            df, roles["timestamp"], source, time_format, has_header, timestamp_unit
        )
    rating = None
    if "rating" in roles:
        rating = _io.numeric(df, roles["rating"], source, pl.Float32, has_header)
    mapping = ", ".join(f"{r}={c}" for r, c in roles.items())
    ignored = ignored_note(df, {**roles, **({"event": event_col} if kept_events else {})})
    notes = [
        f"{read_note} ({mapping})",
        *([kept_events] if kept_events else []),
        *([ignored] if ignored else []),
        *([exploded] if exploded else []),
        *skipped,
    ]
    if ts is not None and unit_note(used, timestamp_unit):
        notes.append(unit_note(used, timestamp_unit))
    items = None
    if item_file is not None:
        meta = read_items(item_file, item_columns)
        items = _attach(meta, item, raw)
        known = int(
            np.isin(
                np.unique(item if raw is None else raw).astype(str),
                np.asarray(meta["raw_id"]).astype(str),
            ).sum()
        )
        read = {"title": "titles", "genres": "categories", "vector": "vectors"}
        used = ", ".join(word for key, word in read.items() if key in meta)
        notes.append(
            f"item metadata from {Path(item_file).name}: {known} of "
            f"{len(np.unique(item))} items described ({used})"
        )
    return _io.build(
        name,
        user,
        item,
        ts,
        rating=rating,
        items=items,
        item_raw=raw,
        notes=tuple(notes),
        user_raw=user_raw,
    )


def _without_incomplete_rows(
    df: pl.DataFrame, roles: dict[str, str], source: str, has_header: bool, place: str
) -> tuple[pl.DataFrame, list[str]]:
    """``df`` without the rows whose user, item or time is empty (an export's guest checkouts,
    a product since deleted), with a warning and a note; when they are half the rows or more the
    column is more likely the wrong one, and the error naming the first empty value stays."""
    cols = [roles[r] for r in ("user", "item", "timestamp") if r in roles]
    empty = df.select(pl.any_horizontal([pl.col(c).is_null() for c in cols])).to_series()
    n = int(empty.sum())
    if n == 0 or 2 * n >= df.height:
        return df, []
    first = int(empty.arg_max()) + 1 + int(has_header)
    by_col = ", ".join(f"{c} {df[c].null_count()}" for c in cols if df[c].null_count())
    note = (
        f"{n} of {df.height} rows skipped: an empty user, item or time ({by_col}; the first at "
        f"{place} {first})"
    )
    log.warning("%s: %s; %s numbers after it count without them", source, note, place)
    return df.filter(~empty), [note]


def _timestamps(df, col, source, time_format, has_header, unit) -> tuple[np.ndarray, str]:
    """Unix seconds of ``col`` read in ``unit``, and the unit used. ``"auto"``: seconds, or for
    numbers that can only be a finer unit (seconds past the year 5000: 10^11, while every
    millisecond time after March 1973 exceeds it) the unit their size implies. An explicit
    ``"s"`` refuses such numbers (a log read as seconds would put every event thousands of
    years ahead)."""
    numeric = df[col].dtype.is_numeric() or (
        df[col].dtype == pl.String and df[col].str.to_integer(strict=False).null_count() == 0
    )
    if unit == "iso" and numeric:
        raise DataError(
            f"{source}: column '{col}' holds numbers, not dates; set the time unit "
            "to 's', 'ms', 'us' or 'ns' (data.time_unit)"
        )
    ts = _io.seconds(df, col, source, time_format, has_header)
    if not numeric:
        return ts, "s"
    top = int(ts.max())
    implied = implied_unit(top)
    if unit == "auto":
        groups = mixed_units(ts)
        if groups:
            raise DataError(
                mixed_units_message(
                    ts,
                    groups,
                    f"{source}: column '{col}'",
                    lambda i: f"line {i + 1 + int(has_header)}",
                )
            )
        unit = implied
    elif unit == "s" and implied != "s":
        raise DataError(
            f"{source}: column '{col}' looks like Unix {UNIT_WORDS[implied]}, not seconds (largest "
            f"value {top} would be past the year 5000 as seconds); set data.time_unit={implied} "
            f"(read_file(..., timestamp_unit='{implied}'))"
        )
    return (ts if unit in ("s", "iso") else np.floor_divide(ts, PER_SECOND[unit])), unit


def read_items(
    path: str | Path, columns: Mapping[str, str] | None = None, sep: str | None = None
) -> dict[str, np.ndarray]:
    """An item-metadata file: ``{"raw_id": ids as text, "title": ..., "genres": ...,
    "vector": ...}`` (every column as text).

    Categories are stored under ``genres`` (``|``-separated names), the side-table column that
    MovieLens fills too, so they also become item attributes (``ItemAttributes``) that
    attribute-aware models such as LSAN read.

    Args:
        path: a CSV/TSV/Parquet/.xlsx file with one row per item (later duplicates are ignored).
        columns: role -> column name for ``item``, ``title``, ``categories``, ``vector``
            (numbers, :mod:`seqrec.data.item_vectors`); missing roles are looked up among
            :data:`ITEM_ALIASES` (``movieId``, ``title``, ``genres``, ...).
        sep: field separator (default from the extension).
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"item file not found: {path}")
    columns = dict(columns or {})
    unknown = set(columns) - set(ITEM_ROLES)
    if unknown:
        raise ConfigError(
            f"item column roles must be among {', '.join(ITEM_ROLES)}, got {sorted(unknown)}"
        )
    plain, _ = _io.strip_compression(path)
    lists: list[str] | None = None
    if Path(plain).suffix.lower() in PARQUET_EXT:
        df = _frame(path, sep, True, None, {"timestamp": None})[0]
    elif Path(plain).suffix.lower() in EXCEL_EXT:
        df = _excel(path)[0]
        df = df.with_columns(pl.col(c).cast(pl.String) for c in df.columns)
    else:
        data = _io.read_bytes(path)
        sep = sep or sniff_separator(
            data, {**TEXT_EXT, ".item": "\t"}.get(Path(plain).suffix.lower(), ",")
        )
        data, lists = strip_header(data, sep)
        df = _io.read_table(
            data, str(path), sep=sep, dtypes={c: pl.String for c in header_names(data, sep, "")}
        )
    roles = {}
    for role in ITEM_ROLES:
        name = columns.get(role) or next((c for c in ITEM_ALIASES[role] if c in df.columns), None)
        if name is not None and name not in df.columns:
            raise DataError(
                f"{path} has no column '{name}' (mapped to {role}; columns "
                f"present: {', '.join(df.columns)})"
            )
        if name is not None:
            roles[role] = name
    if roles.get("categories") in (lists or ()):  # RecBole's token_seq: space-separated lists
        df = df.with_columns(pl.col(roles["categories"]).str.replace_all(" ", "|"))
    if "item" not in roles or len(roles) == 1:
        raise DataError(
            f"{path}: an item file needs an item id column and a title, categories or "
            f"vector column (columns present: {', '.join(df.columns)}); map them with "
            "data.item_columns=item=<col>,title=<col>,categories=<col>,vector=<col>"
        )
    _io.no_nulls(df, roles["item"], str(path))
    df = df.unique(subset=roles["item"], keep="first", maintain_order=True)
    if "vector" in roles and isinstance(df.schema[roles["vector"]], (pl.List, pl.Array)):
        # a Parquet list column: as the text every other layout gives (parsed after filtering)
        col = pl.col(roles["vector"])
        df = df.with_columns(col.cast(pl.List(pl.String)).list.join(" ").alias(roles["vector"]))
    out = {"raw_id": df[roles["item"]].cast(pl.String).to_numpy().astype(object)}
    for role, key in (("title", "title"), ("categories", "genres"), ("vector", "vector")):
        if role in roles:
            out[key] = df[roles[role]].cast(pl.String).fill_null("").to_numpy().astype(object)
    return out


def _attach(
    meta: dict[str, np.ndarray], item: np.ndarray, raw: np.ndarray | None
) -> dict[str, np.ndarray]:
    """The side table for ``build``: keyed by raw text for string ids, by the integer ids
    otherwise (matched through their decimal text)."""
    if raw is not None:
        return meta  # build() aligns it on raw_id
    ids = np.unique(item)
    return {"item": ids, **_io.align(meta, ids.astype(str).astype(object), key="raw_id")}
