"""MovieLens raw formats (GroupLens, https://grouplens.org/datasets/movielens/).

* ML-100K: ``u.data`` (tab-separated ``user item rating timestamp``, no header) and ``u.item``
  (``|``-separated, latin-1: id, title, release dates, IMDb URL, 19 genre flags).
* ML-1M / ML-10M: ``ratings.dat`` (``UserID::MovieID::Rating::Timestamp``) and ``movies.dat``
  (``MovieID::Title::Genres``; ML-1M is latin-1).
* ML-20M / ml-latest(-small): ``ratings.csv`` (``userId,movieId,rating,timestamp`` with a
  header) and ``movies.csv`` (``movieId,title,genres``, quoted titles).

Every reader returns :class:`Interactions` with real timestamps, the rating column and an item
side table ``{"item", "title", "genres"}`` when the movie file is given. Cite F. M. Harper and
J. A. Konstan, *The MovieLens Datasets: History and Context*, ACM TiiS 2015.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import numpy as np
import polars as pl

from seqrec.data.interactions import Interactions
from seqrec.data.sources import _io
from seqrec.errors import DataError

# u.genre of ML-100K, in flag order.
ML100K_GENRES = (
    "unknown",
    "Action",
    "Adventure",
    "Animation",
    "Children's",
    "Comedy",
    "Crime",
    "Documentary",
    "Drama",
    "Fantasy",
    "Film-Noir",
    "Horror",
    "Musical",
    "Mystery",
    "Romance",
    "Sci-Fi",
    "Thriller",
    "War",
    "Western",
)
_RATING_DTYPES = {"user": pl.Int64, "item": pl.Int64, "rating": pl.Float32, "timestamp": pl.Int64}


def _ratings(df: pl.DataFrame, source: str, name: str, header: bool, items=None) -> Interactions:
    for col in ("user", "item", "timestamp"):
        _io.no_nulls(df, col, source, header)
    return _io.build(
        name,
        df["user"].to_numpy(),
        df["item"].to_numpy(),
        df["timestamp"].to_numpy(),
        rating=_io.numeric(df, "rating", source, pl.Float32, header),
        items=items,
    )


# --- ML-100K -------------------------------------------------------------------------------------
def read_uitem(path: str | Path) -> dict[str, np.ndarray]:
    """ML-100K ``u.item`` as a side table ``{"item", "title", "genres"}`` (genres ``|``-joined)."""
    names = ["item", "title", "release", "video_release", "imdb"] + [f"g{i}" for i in range(19)]
    df = _io.read_table(
        _io.read_bytes(path, encoding="latin-1"),
        str(path),
        sep="|",
        header=False,
        names=names,
        dtypes={"item": pl.Int64},
        quote=None,
    )
    flags = (
        pl.concat_list(
            [pl.when(pl.col(f"g{i}") == "1").then(pl.lit(g)) for i, g in enumerate(ML100K_GENRES)]
        )
        .list.drop_nulls()
        .list.join("|")
    )
    df = df.with_columns(genres=flags)
    return {
        "item": df["item"].to_numpy(),
        "title": df["title"].to_numpy(),
        "genres": df["genres"].to_numpy(),
    }


def read_udata(
    path: str | Path, items_path: str | Path | None = None, name: str = "ml-100k"
) -> Interactions:
    """ML-100K ``u.data`` (+ optional ``u.item`` for titles and genres)."""
    df = _io.read_table(
        _io.read_bytes(path),
        str(path),
        sep="\t",
        header=False,
        names=["user", "item", "rating", "timestamp"],
        dtypes=_RATING_DTYPES,
    )
    items = read_uitem(items_path) if items_path is not None else None
    return _ratings(df, str(path), name, False, items)


# --- ML-1M / ML-10M (.dat) ------------------------------------------------------------------------
def read_movies_dat(path: str | Path) -> dict[str, np.ndarray]:
    """``movies.dat`` (``MovieID::Title::Genres``) as a side table."""
    df = _io.read_table(
        _io.read_bytes(path, encoding="latin-1"),
        str(path),
        sep="::",
        header=False,
        names=["item", "title", "genres"],
        dtypes={"item": pl.Int64},
    )
    return {
        "item": df["item"].to_numpy(),
        "title": df["title"].to_numpy(),
        "genres": df["genres"].to_numpy(),
    }


def read_ratings_dat(
    path: str | Path, movies_path: str | Path | None = None, name: str = "ml-1m"
) -> Interactions:
    """``ratings.dat`` of ML-1M / ML-10M (``UserID::MovieID::Rating::Timestamp``)."""
    df = _io.read_table(
        _io.read_bytes(path),
        str(path),
        sep="::",
        header=False,
        names=["user", "item", "rating", "timestamp"],
        dtypes=_RATING_DTYPES,
    )
    items = read_movies_dat(movies_path) if movies_path is not None else None
    return _ratings(df, str(path), name, False, items)


# --- ML-20M / latest (.csv) ------------------------------------------------------------------------
def _movies_csv(data: bytes, source: str) -> dict[str, np.ndarray]:
    df = _io.read_table(data, source, dtypes={"movieId": pl.Int64})
    _io.require(df, ("movieId", "title", "genres"), source)
    return {
        "item": df["movieId"].to_numpy(),
        "title": df["title"].to_numpy(),
        "genres": df["genres"].to_numpy(),
    }


def read_movies_csv(path: str | Path) -> dict[str, np.ndarray]:
    """``movies.csv`` (``movieId,title,genres``) as a side table."""
    return _movies_csv(_io.read_bytes(path), str(path))


def _ratings_csv(data: bytes, source: str, name: str, items=None) -> Interactions:
    df = _io.read_table(
        data, source, dtypes={"userId": pl.Int64, "movieId": pl.Int64, "timestamp": pl.Int64}
    )
    _io.require(df, ("userId", "movieId", "rating", "timestamp"), source)
    df = df.rename({"userId": "user", "movieId": "item"})
    return _ratings(df, source, name, True, items)


def read_ratings_csv(
    path: str | Path, movies_path: str | Path | None = None, name: str = "movielens"
) -> Interactions:
    """``ratings.csv`` of ML-20M / ml-latest(-small) (``userId,movieId,rating,timestamp``)."""
    items = read_movies_csv(movies_path) if movies_path is not None else None
    return _ratings_csv(_io.read_bytes(path), str(path), name, items)


def read_movielens_dir(directory: str | Path, name: str | None = None) -> Interactions:
    """Any unzipped GroupLens folder: finds ``u.data``, ``ratings.dat`` or ``ratings.csv``."""
    d = Path(directory)
    name = name or d.name
    if (d / "u.data").is_file():
        item = d / "u.item"
        return read_udata(d / "u.data", item if item.is_file() else None, name)
    if (d / "ratings.dat").is_file():
        movies = d / "movies.dat"
        return read_ratings_dat(d / "ratings.dat", movies if movies.is_file() else None, name)
    if (d / "ratings.csv").is_file():
        movies = d / "movies.csv"
        return read_ratings_csv(d / "ratings.csv", movies if movies.is_file() else None, name)
    raise DataError(f"no MovieLens ratings file (u.data, ratings.dat, ratings.csv) in {d}")


# --- shipped ml-latest-small ----------------------------------------------------------------------
def load_latest_small() -> Interactions:
    """ml-latest-small (2018-09) shipped inside the package: 610 users, 9,724 items, 100,836
    ratings, with timestamps, titles and genres (GroupLens terms allow redistribution)."""
    base = resources.files("seqrec").joinpath("datasets/ml-latest-small")
    ratings, movies = base.joinpath("ratings.csv.xz"), base.joinpath("movies.csv.xz")
    items = _movies_csv(_io.COMPRESSIONS[".xz"](movies.read_bytes()), "ml-latest-small/movies.csv")
    return _ratings_csv(
        _io.COMPRESSIONS[".xz"](ratings.read_bytes()),
        "ml-latest-small/ratings.csv",
        "ml-latest-small",
        items,
    )
