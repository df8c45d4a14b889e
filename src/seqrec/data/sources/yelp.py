"""Yelp Open Dataset reviews (``yelp_academic_dataset_review.json``; JSON lines with
``user_id``, ``business_id``, ``stars`` and ``date`` as ``"YYYY-MM-DD HH:MM:SS"``).

Yelp's terms require each user to accept them on https://www.yelp.com/dataset before
downloading, so seqrec never downloads it: place the file (plain, .gz or .xz) somewhere and pass
its path. User and business ids are strings, factorized to int codes; the business strings are
kept as ``items["raw_id"]``.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from seqrec.data.interactions import Interactions
from seqrec.data.sources import _io

_SCHEMA = {"user_id": pl.String, "business_id": pl.String, "stars": pl.Float64, "date": pl.String}
MANUAL = (
    "Yelp data requires accepting the Yelp Dataset Terms of Use: download it by hand from "
    "https://www.yelp.com/dataset, unpack yelp_academic_dataset_review.json and pass its path "
    "(seqrec.data.sources.yelp.read_reviews(path) or `load(path)`)"
)


def read_reviews(path: str | Path, name: str = "yelp") -> Interactions:
    """Yelp ``review.json`` lines -> interactions with second-resolution timestamps."""
    source = str(path)
    df = _io.read_ndjson(path, _SCHEMA, source)
    user, _ = _io.ids(df, "user_id", source, header=False)
    item, raw = _io.ids(df, "business_id", source, header=False)
    return _io.build(
        name,
        user,
        item,
        _io.seconds(df, "date", source, "%Y-%m-%d %H:%M:%S", header=False),
        rating=_io.numeric(df, "stars", source, pl.Float32, header=False),
        item_raw=raw,
        notes=("Yelp review.json (user_id, business_id, stars, date)",),
    )
