"""Steam reviews of W.-C. Kang and J. McAuley (``steam_reviews.json.gz``, used by SASRec and
BERT4Rec). Cite W.-C. Kang, J. McAuley, *Self-Attentive Sequential Recommendation*, ICDM 2018;
M. Wan, J. McAuley, RecSys 2018; A. Pathak, K. Gupta, J. McAuley, RecSys 2017.

The file is not JSON: every line is a Python dict literal (``{'username': 'x', 'product_id':
'725280', 'date': 'YYYY-MM-DD', ...}``). It is parsed without ``eval``: a vectorized regular
expression (Polars, in Rust) pulls the three fields out of every line; the rare values holding
escapes are unescaped with :func:`ast.literal_eval` on the string literal alone, and a line the
expression cannot read falls back to ``ast.literal_eval`` of that line (literals only, never
code). ``username`` is the user (as in SASRec's preprocessing), ``product_id`` the item, ``date``
(day granularity) the time; ties keep file order.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import polars as pl

from seqrec.data.interactions import Interactions
from seqrec.data.sources import _io
from seqrec.errors import DataError

FIELDS = ("username", "product_id", "date")
_LITERAL = r"""('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|-?\d+)"""


def _pattern(key: str) -> str:
    return rf"""[{{,]\s*['"]{key}['"]\s*:\s*{_LITERAL}"""


def _unquote(col: pl.Series) -> pl.Series:
    """Text of the extracted literals; quoted ones lose their quotes, escapes are resolved."""
    quoted = col.str.starts_with("'") | col.str.starts_with('"')
    inner = pl.select(
        pl.when(quoted).then(col.str.slice(1, col.str.len_chars() - 2)).otherwise(col)
    ).to_series()
    escaped = np.flatnonzero(
        (inner.str.contains("\\", literal=True) & quoted).fill_null(False).to_numpy()
    )
    if escaped.size:  # rare: names with quotes or non-ASCII written as \x.. / \u....
        fixed = [str(ast.literal_eval(col[i])) for i in escaped.tolist()]
        inner = inner.scatter(escaped, pl.Series(fixed, dtype=pl.String))
    return inner


def _block(data: bytes, first_line: int, source: str) -> pl.DataFrame:
    """The three fields of every non-empty line of ``data`` (whole lines)."""
    lines = pl.read_csv(
        data,
        has_header=False,
        separator="\x1f",
        quote_char=None,
        schema={"line": pl.String},
        truncate_ragged_lines=True,
    )["line"]
    keep = np.flatnonzero((lines.str.strip_chars().str.len_bytes() > 0).fill_null(False).to_numpy())
    lines = lines.gather(keep)
    cols = {k: _unquote(lines.str.extract(_pattern(k), 1)) for k in FIELDS}
    null = np.zeros(len(lines), dtype=bool)
    for c in cols.values():
        null |= c.is_null().to_numpy()
    missing = np.flatnonzero(null)
    if missing.size > 1000 and missing.size > len(lines) // 2:
        i = int(missing[0])
        raise DataError(
            f"{source} does not look like steam_reviews (line {first_line + keep[i]}: "
            f"{lines[i][:80]!r}); expected Python dict lines with {', '.join(FIELDS)}"
        )
    if missing.size:  # lines the expression cannot read: literal_eval of those lines only
        records = [_literal_line(lines[int(i)], first_line + int(keep[i]), source) for i in missing]
        for k in FIELDS:
            values = pl.Series([str(r[k]) for r in records], dtype=pl.String)
            cols[k] = cols[k].scatter(missing, values)
    return pl.DataFrame(cols)


def read_reviews(path: str | Path, name: str = "steam", block_bytes: int = 1 << 28) -> Interactions:
    """``steam_reviews.json.gz`` (plain, .gz or .xz) -> interactions (implicit, day times).

    The file is decompressed and parsed in blocks of about ``block_bytes`` whole lines, so
    memory stays bounded by one block plus the three extracted columns.
    """
    source = str(path)
    frames = [_block(data, first, source) for first, data in _io.iter_blocks(path, block_bytes)]
    if not frames or sum(f.height for f in frames) == 0:
        raise DataError(f"file {path} is empty")
    df = pl.concat(frames)
    user, _ = _io.ids(df, "username", source, header=False)
    item, raw = _io.ids(df, "product_id", source, header=False)
    ts = _io.seconds(df, "date", source, "%Y-%m-%d", header=False)
    return _io.build(
        name,
        user,
        item,
        ts,
        item_raw=raw,
        notes=("Steam reviews (username, product_id, date); day granularity",),
    )


def _literal_line(line: str, lineno: int, source: str) -> dict:
    try:
        record = ast.literal_eval(line)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise DataError(
            f"{source}: line {lineno} is not a Python dict literal: {line[:80]!r}"
        ) from None
    if not isinstance(record, dict):
        raise DataError(f"{source}: line {lineno} is not a dict: {line[:80]!r}")
    for k in FIELDS:
        if k not in record:
            raise DataError(
                f"{source}: line {lineno} has no key '{k}' "
                f"(keys present: {', '.join(map(str, record))})"
            )
    return record
