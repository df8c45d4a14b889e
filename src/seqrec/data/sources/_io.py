"""Shared reading helpers for every source: decompress into memory, parse with Polars, turn
Polars' deep parse errors into one-line :class:`DataError` messages, factorize string ids.

Nothing here loops over rows in Python on the success path; the slow, line-by-line scans only
run after a parse has already failed, to tell the user *where* the file is broken.
"""

from __future__ import annotations

import bz2
import gzip
import logging
import lzma
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import polars as pl

from seqrec.data.interactions import Interactions
from seqrec.errors import DataError

log = logging.getLogger(__name__)

COMPRESSIONS = {".xz": lzma.decompress, ".gz": gzip.decompress, ".bz2": bz2.decompress}
_UNIT_SEP = "\x1f"  # stands in for multi-character separators such as MovieLens' "::"


def strip_compression(path: Path) -> tuple[str, str | None]:
    """``("ratings.csv", ".xz")`` for ``ratings.csv.xz``; the compression is None if absent."""
    suffix = path.suffix.lower()
    if suffix in COMPRESSIONS:
        return path.name[: -len(suffix)], suffix
    return path.name, None


def open_binary(path: str | Path):
    """A binary stream of the decompressed content (streaming; nothing read yet)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"file not found: {path}")
    comp = strip_compression(path)[1]
    return {".gz": gzip.open, ".xz": lzma.open, ".bz2": bz2.open}.get(comp, open)(path, "rb")


def iter_blocks(path: str | Path, block_bytes: int = 1 << 28):
    """Yield ``(first_line_number, bytes)`` blocks of whole lines of the decompressed file."""
    line = 1
    rest = b""
    try:
        with open_binary(path) as fh:
            while True:
                chunk = fh.read(block_bytes)
                if not chunk:
                    break
                data = rest + chunk
                cut = data.rfind(b"\n") + 1
                if cut == 0:  # no newline yet: keep reading
                    rest = data
                    continue
                block, rest = data[:cut], data[cut:]
                yield line, block
                line += block.count(b"\n")
    except (OSError, EOFError, lzma.LZMAError) as exc:
        raise DataError(f"cannot read {path}: {type(exc).__name__}: {exc}") from None
    if rest.strip():
        yield line, rest


def read_bytes(path: str | Path, *, text: bool = True, encoding: str | None = None) -> bytes:
    """The decompressed content of ``path`` (``.xz``, ``.gz``, ``.bz2`` or plain); a text file
    (``text``, the default) comes back as UTF-8 without a byte-order mark, and binary content
    there is refused with the formats seqrec reads. ``encoding`` names the 8-bit encoding of a
    file known to use one (MovieLens' item files are Latin-1): it is decoded with it when it is
    not valid UTF-8, without the warning a user's unknown file gets."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"file not found: {path}")
    _, comp = strip_compression(path)
    try:
        raw = path.read_bytes()
        data = COMPRESSIONS[comp](raw) if comp else raw
    except (OSError, EOFError, lzma.LZMAError, gzip.BadGzipFile, ValueError) as exc:
        raise DataError(f"cannot read {path}: {type(exc).__name__}: {exc}") from None
    if not data.strip():
        raise DataError(f"file {path} is empty")
    if not text:
        return data
    data = _without_byte_order_mark(data, path)
    if b"\x00" in data[:4096]:  # text never holds NUL bytes; a spreadsheet or archive does
        raise DataError(
            f"{path} is not a text table (it holds binary bytes; a spreadsheet or an "
            "archive?): seqrec reads delimited text (.csv, .tsv, .dat, .txt; also "
            ".gz, .xz, .bz2 compressed) and .parquet; save a spreadsheet as CSV"
        )
    return _as_utf8(data, path, encoding)  # after the binary check: an archive is not 8-bit text


def _without_byte_order_mark(data: bytes, path: Path) -> bytes:
    """UTF-8 without a byte-order mark: Excel saves 'CSV UTF-8' with a UTF-8 mark and 'Unicode
    Text' as UTF-16 with its own mark; both are common first files."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16").encode("utf-8")
        except UnicodeDecodeError as exc:
            raise DataError(
                f"cannot read {path}: it starts like UTF-16 text but {exc.reason} "
                f"at byte {exc.start}"
            ) from None
    return data.removeprefix(b"\xef\xbb\xbf")


def _as_utf8(data: bytes, path: Path, encoding: str | None = None) -> bytes:
    """Valid UTF-8 as it is; an 8-bit file re-encoded from ``encoding`` when the caller knows
    it, else from Windows-1252 with a warning (see below)."""
    if data.isascii():  # most logs: no decoding at all
        return data
    try:
        data.decode("utf-8")  # validity only
    except UnicodeDecodeError as exc:
        if encoding is not None:
            return data.decode(encoding).encode("utf-8")
        line = data.count(b"\n", 0, exc.start) + 1
        if not data[: exc.start].isascii():  # UTF-8 text up to there: a damaged byte
            raise DataError(
                f"{path}: invalid UTF-8 at line {line} (byte {exc.start}) in a file "
                "that is UTF-8 before it; fix or remove that line"
            ) from None
        # no valid non-ASCII character before the first invalid byte: an 8-bit encoding, most
        # often Windows-1252 / Latin-1 (Excel's "CSV" on Windows)
        log.warning(
            "%s is not UTF-8 (line %d): read as Windows-1252 / Latin-1; save it as UTF-8 "
            "if its ids look wrong",
            path,
            line,
        )
        try:
            return data.decode("cp1252").encode("utf-8")
        except UnicodeDecodeError:  # the 5 bytes cp1252 leaves undefined
            return data.decode("latin-1").encode("utf-8")
    return data


def head_lines(data: bytes, n: int = 1) -> list[bytes]:
    """The first ``n`` lines of ``data`` (without their ``\r``), without copying the rest of a
    large file (``data.split(b"\n", n)`` copies everything after the last cut)."""
    end = -1
    for _ in range(n):
        end = data.find(b"\n", end + 1)
        if end < 0:
            break
    head = data if end < 0 else data[:end]
    return [ln.rstrip(b"\r") for ln in head.split(b"\n")][:n]


def _drop_repeated_header(data: bytes, source: str) -> bytes:
    """``data`` without later copies of its header line: files joined with ``cat a.csv b.csv``
    repeat it, and the copy read as a row stopped the load at 'timestamp' is not a time. The
    file is copied only when it holds such a line."""
    head = head_lines(data)[0]
    if not head.strip() or b"\n" + head not in data:
        return data
    lines = data.split(b"\n")
    kept = [lines[0]] + [ln for ln in lines[1:] if ln.rstrip(b"\r") != head]
    dropped = len(lines) - len(kept)
    if dropped:
        first = next(i for i, ln in enumerate(lines[1:], 2) if ln.rstrip(b"\r") == head)
        log.warning(
            "%s: skipped %d repeated header line(s), the first at line %d (files joined "
            "with their headers?); line numbers after it count without them",
            source,
            dropped,
            first,
        )
    return b"\n".join(kept)


def _first_line(msg: str) -> str:
    return next((ln.strip() for ln in str(msg).splitlines() if ln.strip()), str(msg))


def drop_blank_tail(data: bytes, sep: str) -> bytes:
    """``data`` without the blank lines, or lines of separators only (spreadsheet exports:
    ``,,,``), at its end: they would read as rows of empty ids. Elsewhere such a line stays an
    error naming its line. Looks at the last lines only; copies ``data`` only when it cuts."""
    junk = b' \t\r\n"' + sep.encode()
    stop = len(data)
    while True:
        while stop and data[stop - 1] in b"\r\n":
            stop -= 1
        start = data.rfind(b"\n", 0, stop) + 1
        if start == 0 or data[start:stop].strip(junk):  # the last line with content
            break
        stop = start
    if data[stop:] in (b"", b"\n", b"\r\n"):
        return data
    return data[:stop] + b"\n"


def read_table(
    data: bytes,
    source: str,
    *,
    sep: str = ",",
    header: bool = True,
    names: Sequence[str] | None = None,
    dtypes: Mapping[str, pl.DataType] | None = None,
    quote: str | None = '"',
) -> pl.DataFrame:
    """Parse delimited ``data`` with Polars.

    Args:
        data: decompressed file content.
        source: how to name the file in error messages.
        sep: field separator; multi-character separators (``::``) are supported.
        header: whether the first line holds column names.
        names: column names for a file without a header (required then: the whole layout).
        dtypes: expected types of some columns (by final name); a value that does not parse
            raises a ``DataError`` naming the column, line and value.
        quote: quote character, None for formats without quoting (MovieLens ``.dat``).
    """
    if not data.strip():
        raise DataError(f"{source} is empty")
    if len(sep) > 1:
        data = data.replace(sep.encode(), _UNIT_SEP.encode())
        sep, quote = _UNIT_SEP, None
    data = drop_blank_tail(data, sep)
    if header:
        data = _drop_repeated_header(data, source)
    dtypes = dict(dtypes or {})
    kwargs: dict = dict(
        separator=sep, has_header=header, quote_char=quote, infer_schema_length=10000
    )
    if not header:
        if names is None:
            raise ValueError("names are required for a file without a header")
        kwargs["schema"] = {n: dtypes.get(n, pl.String) for n in names}
    else:
        kwargs["schema_overrides"] = dtypes
    try:
        df = pl.read_csv(data, **kwargs)
    except pl.exceptions.NoDataError:
        raise DataError(f"{source} is empty") from None
    except pl.exceptions.PolarsError as exc:
        raise _explain(data, source, sep, header, names, dtypes, quote, exc) from None
    if df.height == 0:
        raise DataError(f"{source} has a header but no rows")
    return df


def _explain(data, source, sep, header, names, dtypes, quote, exc) -> DataError:
    """Find the line that broke the fast parse (slow path, only after a failure)."""
    msg = str(exc)
    if "more fields" in msg:
        lines = data.split(b"\n")
        expected = len(names) if names else lines[0].count(sep.encode()) + 1
        for lineno, line in enumerate(lines, start=1):
            n = line.rstrip(b"\r").count(sep.encode()) + 1
            if line.strip() and n > expected:
                return DataError(
                    f"{source}: line {lineno} has {n} fields, expected {expected}: "
                    f"{line[:80].decode('utf-8', 'replace')!r}"
                )
    try:
        kwargs: dict = dict(
            separator=sep,
            has_header=header,
            quote_char=quote,
            infer_schema=False,
            truncate_ragged_lines=True,
        )
        if not header:
            kwargs["new_columns"] = list(names)
        text = pl.read_csv(data, **kwargs)
    except pl.exceptions.PolarsError:
        return DataError(f"{source}: cannot parse: {_first_line(msg)}")
    for col, dtype in dtypes.items():
        if col not in text.columns:
            continue
        s = text[col]
        bad = s.is_not_null() & s.cast(dtype, strict=False).is_null()
        if bad.any():
            row = int(bad.arg_max())
            kind = "an integer" if dtype.is_integer() else f"a {dtype}"
            return DataError(
                f"{source}: column '{col}' must hold {kind}, got {s[row]!r} at line "
                f"{row + 1 + int(header)} ({int(bad.sum())} bad values)"
            )
    return DataError(f"{source}: cannot parse: {_first_line(msg)}")


def require(df: pl.DataFrame, columns: Sequence[str], source: str) -> None:
    """Raise a ``DataError`` naming the first missing column and listing those present."""
    for col in columns:
        if col not in df.columns:
            raise DataError(
                f"{source} has no column '{col}' (columns present: {', '.join(df.columns)})"
            )


def no_nulls(df: pl.DataFrame, col: str, source: str, header: bool = True) -> None:
    s = df[col]
    n = s.null_count()
    if n:
        row = int(s.is_null().arg_max())
        raise DataError(
            f"{source}: column '{col}' is empty at line {row + 1 + int(header)} ({n} empty values)"
        )


def factorize(s: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """Dense int codes ``0..K-1`` in sorted order of the values, and the sorted unique values
    (``uniques[code]`` is the original value)."""
    codes = (s.rank("dense") - 1).cast(pl.Int64).to_numpy()
    uniques = s.unique().sort().to_numpy()
    return codes, uniques


def ids(
    df: pl.DataFrame, col: str, source: str, header: bool = True
) -> tuple[np.ndarray, np.ndarray | None]:
    """Integer ids of ``col``: ``(values, None)`` for integer columns and for text holding
    canonical integers only, ``(codes, raw strings)`` for other text (factorized, so ids with
    leading zeros such as Amazon ASINs keep their exact spelling)."""
    no_nulls(df, col, source, header)
    s = df[col]
    if isinstance(s.dtype, (pl.Categorical, pl.Enum)):  # pandas' "category" in a parquet file
        s = s.cast(pl.String)
    if s.dtype.is_integer():
        return s.cast(pl.Int64).to_numpy(), None
    if s.dtype.is_float():
        ints = s.cast(pl.Int64, strict=False)
        bad = (ints.cast(pl.Float64) != s) | ints.is_null()
        if bad.any():
            row = int(bad.arg_max())
            raise DataError(
                f"{source}: column '{col}' must hold integer ids, got {s[row]!r} "
                f"at line {row + 1 + int(header)}"
            )
        return ints.to_numpy(), None
    if s.dtype == pl.String:
        # whole numbers written as decimals ("12346.0": pandas writes an integer column with a
        # gap as floats) are the integers they spell, or `--user 12346` would not find them
        if s.str.ends_with(".0").any() and s.str.contains(r"^-?\d+\.0+$|^-?\d+$").all():
            log.warning(
                "%s: column '%s' holds whole numbers written as decimals (%s): read as integers",
                source,
                col,
                s.filter(s.str.ends_with(".0"))[0],
            )
            s = s.str.replace(r"\.0+$", "")
        # canonical integers ("725280", not "0205616461") stay integers; anything else is text
        as_int = s.str.to_integer(strict=False)
        if as_int.null_count() == 0 and (as_int.cast(pl.String) == s).all():
            return as_int.cast(pl.Int64).to_numpy(), None
        return factorize(s)
    raise DataError(f"{source}: column '{col}' must hold ids (integers or strings), got {s.dtype}")


def numeric(
    df: pl.DataFrame, col: str, source: str, dtype=pl.Float64, header: bool = True
) -> np.ndarray:
    """A numeric column as NumPy; text that is not a number raises a ``DataError``."""
    no_nulls(df, col, source, header)
    s = df[col]
    out = s.cast(dtype, strict=False)
    bad = out.is_null()
    if bad.any():
        row = int(bad.arg_max())
        raise DataError(
            f"{source}: column '{col}' must be numeric, got {s[row]!r} at line {row + 1 + int(header)}"
        )
    return out.to_numpy()


def seconds(
    df: pl.DataFrame, col: str, source: str, fmt: str | None = None, header: bool = True
) -> np.ndarray:
    """Unix seconds from an integer, float, date/datetime or text column (``fmt`` is a strftime
    format for text; None tries ISO dates/datetimes)."""
    no_nulls(df, col, source, header)
    s = df[col]
    if isinstance(s.dtype, (pl.Categorical, pl.Enum)):  # pandas' "category" in a parquet file
        s = s.cast(pl.String)
    if s.dtype.is_integer():
        return s.cast(pl.Int64).to_numpy()
    if s.dtype.is_float():
        return np.floor(s.to_numpy()).astype(np.int64)
    if s.dtype == pl.Date:
        return s.cast(pl.Datetime("ms")).dt.epoch("s").to_numpy()
    if isinstance(s.dtype, pl.Datetime):
        return s.dt.epoch("s").to_numpy()
    if s.dtype == pl.String:
        as_int = s.str.to_integer(strict=False)
        if as_int.null_count() == 0:
            return as_int.cast(pl.Int64).to_numpy()
        parsed = (
            s.str.to_datetime(fmt, strict=False)
            if fmt
            else _parse_iso(s, f"{source}: column '{col}'")
        )
        if parsed.null_count() and not fmt:
            _check_one_zone_form(s, f"{source}: column '{col}'", header)
        if parsed.null_count():
            bad = as_int.is_null() & parsed.is_null()
            row = int(bad.arg_max()) if bad.any() else int(as_int.is_null().arg_max())
            what = "got" if bad.any() else "mixes Unix seconds and dates, e.g."
            raise DataError(
                f"{source}: column '{col}' must hold a time (Unix seconds or "
                f"{fmt or 'an ISO date'}), {what} {s[row]!r} at line {row + 1 + int(header)}"
            )
        return parsed.dt.epoch("s").to_numpy()
    raise DataError(f"{source}: column '{col}' must hold a time, got dtype {s.dtype}")


_ZONE = r"(Z|[+-]\d{2}:?\d{2})$"


def _check_one_zone_form(s: pl.Series, what: str, header: bool) -> None:
    """Dates with a time zone and dates without one in one column: each parses on its own,
    together they cannot (which zone is a naive one in?); name one of each."""
    zoned = s.str.contains(r"\d" + _ZONE)
    if zoned.any() and not zoned.all():
        with_zone, without = int(zoned.arg_max()), int((~zoned).arg_max())
        raise DataError(
            f"{what} mixes dates with a time zone and dates without one ({s[with_zone]!r} at "
            f"line {with_zone + 1 + int(header)}, {s[without]!r} at line {without + 1 + int(header)}): "
            "write them all one way (e.g. every date in UTC with a Z)"
        )


def _parse_iso(s: pl.Series, what: str) -> pl.Series:
    for fmt in ("%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d"):
        parsed = s.str.to_datetime(fmt, strict=False)
        if parsed.null_count() == 0:
            return parsed
    slashed = _slash_dates(s, what)
    if slashed is not None:
        return slashed
    try:
        return s.str.to_datetime(strict=False)
    except pl.exceptions.PolarsError:  # no format fits any value
        return pl.Series(s.name, [None] * len(s), dtype=pl.Datetime("us"))


def _slash_dates(s: pl.Series, what: str) -> pl.Series | None:
    """``01/02/2020``: day first or month first? Polars' inference silently picks one. The
    values decide when one order fits them all (a 13th or later in one field); when both fit,
    it is ambiguous and ``DataError`` asks for the format. None: not slash dates."""
    parts = s.str.extract_groups(r"^(\d{1,2})/(\d{1,2})/(\d{4})(?:[ T]\d{1,2}:\d{2}(?::\d{2})?)?$")
    first, second = parts.struct.field("1").cast(pl.Int32), parts.struct.field("2").cast(pl.Int32)
    if first.null_count():
        return None
    orders = [
        order
        for order, (day, month) in (("%d/%m/%Y", (first, second)), ("%m/%d/%Y", (second, first)))
        if bool(((month >= 1) & (month <= 12) & (day >= 1) & (day <= 31)).all())
    ]
    if not orders:  # a 13th in the first field of one row and in the second of another
        orders = ["%d/%m/%Y"]  # the parse below leaves nulls where it fails: that line is named
    elif len(orders) == 2:
        example = s[0]
        raise DataError(
            f"{what}: dates like {example!r} read as day/month and as month/day alike; set "
            "the format: data.time_format='%d/%m/%Y' or '%m/%d/%Y' (with ' %H:%M' or "
            "' %H:%M:%S' when the values carry a time)"
        )
    text = s.str.replace("T", " ", literal=True)
    tries = [
        text.str.to_datetime(orders[0] + suffix, strict=False)
        for suffix in ("", " %H:%M", " %H:%M:%S")
    ]
    # all parse, or nulls where a value does not (31/02/2020): the caller names that line
    return min(tries, key=lambda parsed: parsed.null_count())


def build(
    name: str,
    user: np.ndarray,
    item: np.ndarray,
    timestamp: np.ndarray | None,
    rating: np.ndarray | None = None,
    items: dict[str, np.ndarray] | None = None,
    item_raw: np.ndarray | None = None,
    notes: Sequence[str] = (),
    user_raw: np.ndarray | None = None,
) -> Interactions:
    """Assemble an ``Interactions``; ``timestamp=None`` means file order (``has_time=False``).
    String item ids (``item_raw``) go to the side table as ``{"item": codes, "raw_id": text}``."""
    notes = tuple(notes)
    has_time = timestamp is not None
    if timestamp is None:
        timestamp = np.arange(len(user), dtype=np.int64)
        notes += ("no timestamps in the source: timestamp = within-file order 0..n-1",)
    if item_raw is not None:
        side = {"item": np.arange(len(item_raw), dtype=np.int64), "raw_id": item_raw}
        if items:  # attach metadata keyed by the raw string id
            side.update(align(items, item_raw, key="raw_id"))
        items = side
        notes += ("string item ids factorized; originals in items['raw_id']",)
    from seqrec.data.attributes import from_genres

    attributes = from_genres(items)  # MovieLens genres become item categories (LSAN reads them)
    return Interactions(
        user=user,
        item=item,
        timestamp=timestamp,
        rating=rating,
        items=items,
        has_time=has_time,
        name=name,
        notes=notes,
        item_attributes=attributes,
        user_raw=user_raw,
    )


def align(table: dict[str, np.ndarray], keys: np.ndarray, key: str) -> dict[str, np.ndarray]:
    """Columns of ``table`` (other than ``key``) reordered to follow ``keys``; missing -> None."""
    index = {k: i for i, k in enumerate(np.asarray(table[key]).tolist())}
    pos = np.array([index.get(k, -1) for k in keys.tolist()], dtype=np.int64)
    out = {}
    for col, values in table.items():
        if col == key:
            continue
        vals = np.asarray(values, dtype=object)
        out[col] = np.where(pos >= 0, vals[np.clip(pos, 0, None)], None)
    return out


def check_json_lines(text: bytes, source: str) -> None:
    """Raise a ``DataError`` naming the first line of ``text`` that is not valid JSON (the slow
    path, after a fast parser failed); return when every line parses."""
    import json

    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            json.loads(line)
        except ValueError as err:
            raise DataError(
                f"{source}: line {lineno} is not valid JSON ({err.msg}): "
                f"{line[:80].decode('utf-8', 'replace')!r}"
            ) from None


def read_ndjson(
    path: str | Path, schema: Mapping[str, pl.DataType], source: str | None = None
) -> pl.DataFrame:
    """JSON lines, keeping only the ``schema`` keys (others are ignored). Plain files are
    scanned lazily (projection), compressed ones are decompressed into memory first. A key that
    is absent from every line raises a ``DataError`` listing the keys of the first line."""
    import json

    path = Path(path)
    source = source or str(path)
    _, comp = strip_compression(path)
    data = read_bytes(path) if comp else None
    try:
        if data is None:
            if not _head(path, 4096).strip():
                raise DataError(f"file {path} is empty")
            df = pl.scan_ndjson(path, schema=dict(schema)).collect()
        else:
            df = pl.read_ndjson(data, schema=dict(schema))
    except pl.exceptions.PolarsError as exc:
        check_json_lines(data if data is not None else path.read_bytes(), source)
        raise DataError(f"{source}: cannot parse JSON lines: {_first_line(str(exc))}") from None
    if df.height == 0:
        raise DataError(f"file {path} is empty")
    for col in schema:
        if df[col].null_count() == df.height:
            head = (data if data is not None else _head(path, 1 << 20)).split(b"\n", 1)[0]
            try:
                keys = ", ".join(json.loads(head))
            except ValueError:
                keys = "?"
            raise DataError(f"{source} has no key '{col}' (keys of the first line: {keys})")
    return df


def _head(path: Path, n: int) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(n)
