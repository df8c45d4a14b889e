"""Steam reviews of W.-C. Kang and J. McAuley (``steam_reviews.json.gz``, used by SASRec and
BERT4Rec). Cite W.-C. Kang, J. McAuley, *Self-Attentive Sequential Recommendation*, ICDM 2018;
M. Wan, J. McAuley, RecSys 2018; A. Pathak, K. Gupta, J. McAuley, RecSys 2017.

The file is not JSON: every line is a Python dict literal (``{'username': 'x', 'product_id':
'725280', 'date': '2017-12-17', ...}``). It is parsed without ``eval``: a vectorized regular
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
    escaped = np.flatnonzero((inner.str.contains(r"\\", literal=True) & quoted).fill_null(False).to_numpy())
    if escaped.size:  # rare: names with quotes or non-ASCII written as \x.. / \u....
        values = inner.to_list()
        for i in escaped.tolist():
            values[i] = str(ast.literal_eval(col[i]))
        inner = pl.Series(values, dtype=pl.String)
    return inner


def read_reviews(path: str | Path, name: str = "steam") -> Interactions:
    """``steam_reviews.json.gz`` (plain, .gz or .xz) -> interactions (implicit, day times)."""
    source = str(path)
    data = _io.read_bytes(path)
    lines = pl.read_csv(data, has_header=False, separator="\x1f", quote_char=None,
                        schema={"line": pl.String}, truncate_ragged_lines=True)["line"]
    lines = lines.filter(lines.str.strip_chars().str.len_bytes() > 0)
    cols = {k: _unquote(lines.str.extract(_pattern(k), 1)) for k in FIELDS}
    null = np.zeros(len(lines), dtype=bool)
    for c in cols.values():
        null |= c.is_null().to_numpy()
    missing = np.flatnonzero(null)
    if missing.size:
        if missing.size > 1000 and missing.size > len(lines) // 2:
            i = int(missing[0])
            raise DataError(f"{source} does not look like steam_reviews (line {i + 1}: "
                            f"{lines[i][:80]!r}); expected Python dict lines with {', '.join(FIELDS)}")
        patched = {k: c.to_list() for k, c in cols.items()}
        for i in missing.tolist():
            record = _literal_line(lines[i], i, source)
            for k in FIELDS:
                patched[k][i] = str(record[k])
        cols = {k: pl.Series(v, dtype=pl.String) for k, v in patched.items()}
    df = pl.DataFrame(cols)
    user, _ = _io.ids(df, "username", source, header=False)
    item, raw = _io.ids(df, "product_id", source, header=False)
    ts = _io.seconds(df, "date", source, "%Y-%m-%d", header=False)
    return _io.build(name, user, item, ts, item_raw=raw,
                     notes=("Steam reviews (username, product_id, date); day granularity",))


def _literal_line(line: str, index: int, source: str) -> dict:
    try:
        record = ast.literal_eval(line)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise DataError(f"{source}: line {index + 1} is not a Python dict literal: {line[:80]!r}") from None
    if not isinstance(record, dict):
        raise DataError(f"{source}: line {index + 1} is not a dict: {line[:80]!r}")
    for k in FIELDS:
        if k not in record:
            raise DataError(f"{source}: line {index + 1} has no key '{k}' "
                            f"(keys present: {', '.join(map(str, record))})")
    return record
