"""Amazon product reviews (McAuley lab), raw formats of the 2014 and 2018 releases.

* Ratings-only CSV, no header. The 2014 files (``ratings_Beauty.csv``) list
  ``user,item,rating,timestamp``; the 2018 files (``Beauty.csv``) list ``item,user,rating,
  timestamp`` (as the two dataset pages state). Choose with ``layout="2014"|"2018"``.
* Review JSON lines (``reviews_Beauty_5.json.gz`` in 2014, ``Beauty_5.json.gz`` in 2018): the
  keys ``reviewerID``, ``asin``, ``overall`` and ``unixReviewTime`` (same in both releases);
  every other key is ignored.

User and item ids are strings: they are factorized to dense int codes (sorted order); the item
strings are kept as ``items["raw_id"]`` (preprocessing maps internal ids back to them), the user
strings are dropped. Timestamps have day granularity, so many same-user events tie: the file
order is kept (and preprocessing records that ties keep file order).

Cite J. McAuley, C. Targett, Q. Shi, A. van den Hengel, SIGIR 2015 (2014 data) or J. Ni,
J. Li, J. McAuley, EMNLP 2019 (2018 data).
"""

from __future__ import annotations

import logging
from pathlib import Path

import polars as pl

from seqrec.data.interactions import Interactions
from seqrec.data.sources import _io
from seqrec.errors import ConfigError

log = logging.getLogger(__name__)
LAYOUTS = {
    "2014": ["user", "item", "rating", "timestamp"],
    "2018": ["item", "user", "rating", "timestamp"],
}


def read_ratings_csv(
    path: str | Path, layout: str = "2014", name: str | None = None
) -> Interactions:
    """A ratings-only CSV (no header); ``layout`` picks the column order of the release."""
    if layout not in LAYOUTS:
        raise ConfigError(f"layout must be one of {sorted(LAYOUTS)}, got {layout!r}")
    source = str(path)
    df = _io.read_table(
        _io.read_bytes(path),
        source,
        sep=",",
        header=False,
        names=LAYOUTS[layout],
        dtypes={"timestamp": pl.Int64},
    )
    if _looks_swapped(df):
        log.warning(
            "%s: the 'user' column looks like ASINs and 'item' like reviewer ids; "
            "is this a %s file? (layout=%r)",
            source,
            "2018" if layout == "2014" else "2014",
            layout,
        )
    user, _ = _io.ids(df, "user", source, header=False)
    item, raw = _io.ids(df, "item", source, header=False)
    return _io.build(
        name or Path(path).name.split(".")[0],
        user,
        item,
        _io.seconds(df, "timestamp", source, header=False),
        rating=_io.numeric(df, "rating", source, pl.Float32, header=False),
        item_raw=raw,
        notes=(f"Amazon {layout} ratings-only CSV",),
    )


def _looks_swapped(df: pl.DataFrame, n: int = 1000) -> bool:
    """ASINs are 10 characters (``B0...`` or an ISBN); reviewer ids start with ``A`` and are
    usually longer. True when most sampled 'user' values look like ASINs and 'item' values not."""
    head = df.head(n)

    def asin_share(col: str) -> float:
        s = head[col].cast(pl.String)
        return float(((s.str.len_chars() == 10) & ~s.str.starts_with("A")).mean() or 0.0)

    return asin_share("user") > 0.9 and asin_share("item") < 0.1


_REVIEW_SCHEMA = {
    "reviewerID": pl.String,
    "asin": pl.String,
    "overall": pl.Float64,
    "unixReviewTime": pl.Float64,
}


def read_reviews_json(path: str | Path, name: str | None = None) -> Interactions:
    """Review JSON lines of the 2014 or 2018 release (5-core or full)."""
    source = str(path)
    df = _io.read_ndjson(path, _REVIEW_SCHEMA, source)
    user, _ = _io.ids(df, "reviewerID", source, header=False)
    item, raw = _io.ids(df, "asin", source, header=False)
    return _io.build(
        name or Path(path).name.split(".")[0],
        user,
        item,
        _io.seconds(df, "unixReviewTime", source, header=False),
        rating=_io.numeric(df, "overall", source, pl.Float32, header=False),
        item_raw=raw,
        notes=("Amazon review JSON lines (reviewerID, asin, overall, unixReviewTime)",),
    )
