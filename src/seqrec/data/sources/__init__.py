"""Data sources: every dataset name seqrec knows, and ``load(name_or_path) -> Interactions``.

A name is looked up in :data:`DATASETS`. Its file is read from the shared data folder, resolved
in this order: the ``root`` argument, ``$SEQREC_DATA_DIR``, ``../shared/data`` from the current
directory, ``<repo>/../shared/data`` beside a source checkout. When the file is not there, the
original downloaded by ``seqrec data download NAME`` (cache ``$SEQREC_CACHE_DIR`` or
``~/.cache/seqrec``, see :mod:`.download`) is read instead when one exists. ``ml-latest-small``
ships inside the package and always loads offline. A named dataset, once parsed, is kept as
Parquet in ``<cache>/parsed`` and reloaded from there while its files are unchanged
(:mod:`.cache`; ``SEQREC_PARSE_CACHE=0`` or ``cache=False`` turns it off).

Anything else is a path: a folder of GroupLens files, ``u.data``, ``ratings.dat``, review JSON
lines (Amazon / Yelp / Steam, told apart by their keys), an Amazon 2014 ``ratings_*.csv``, or any
CSV / TSV / Parquet file, read by :func:`.generic.read_file` with its options (``columns=``,
``sep=``, ...).
"""

from __future__ import annotations

import importlib
import inspect
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seqrec.data.interactions import Interactions
from seqrec.data.sources import download as _download
from seqrec.errors import ConfigError, DataError, DataUnavailable, UnknownNameError, did_you_mean

__all__ = ["DATASETS", "DatasetSpec", "data_dir", "dataset_names", "describe_source", "load"]

_S3REC = "S3-Rec / ICLRec / FMLP-Rec id space and tie order, no timestamps"
_NC = "research use only, no redistribution"


@dataclass(frozen=True)
class DatasetSpec:
    """One named dataset."""

    name: str
    description: str
    files: tuple[str, ...] = ()
    """Files in the shared data folder: the first is required, the others (side tables) optional."""
    reader: str = "shared_files:read_seq_tsv"
    """``module:function`` called as ``f(file, *optional_files)`` (the seq reader gets the name)."""
    stats: tuple[int, int, int] | None = None
    """(users, items, interactions) of the file as it loads, before any filtering."""
    has_time: bool = False
    terms: str = _NC
    download: str | None = None
    """Key of :data:`.download.REMOTES` whose original is the fallback when the file is absent."""
    raw_reader: str | None = None
    """``module:function`` reading that downloaded original (its path)."""


def _seq(name, file, desc, stats, time=False, download=None, raw=None):
    return DatasetSpec(
        name, desc, (file,), stats=stats, has_time=time, download=download, raw_reader=raw
    )


def _with_attributes(name, file, attributes, desc, stats, time=False):
    """A sequence file plus its optional item-attribute table (categories, brands)."""
    return DatasetSpec(
        name,
        desc,
        (file, attributes),
        "shared_files:read_seq_with_attributes",
        stats,
        has_time=time,
    )


# readers called as f(file, dataset name, *optional files)
_NAMED_READERS = ("shared_files:read_seq_tsv", "shared_files:read_seq_with_attributes")
_S3REC_ATTR = "; item attributes (brand, categories) of S3-Rec"


_AMAZON_RAW = "amazon:read_reviews_json"
_ML_RAW = "movielens:read_movielens_dir"
DATASETS: dict[str, DatasetSpec] = {
    s.name: s
    for s in [
        DatasetSpec(
            "ml-latest-small",
            "MovieLens latest-small (2018-09), shipped in the package: "
            "ratings 0.5-5, titles and genres",
            reader="movielens:load_latest_small",
            stats=(610, 9724, 100836),
            has_time=True,
            terms="GroupLens terms: research use, redistribution under the same terms",
        ),
        DatasetSpec(
            "ml-1m",
            "complete MovieLens-1M in per-user time order with ratings, no "
            "timestamps (timestamp = file order); titles from movies.dat",
            ("ml-1m.seq.tsv.xz", "ml-1m.movies.dat.xz"),
            "shared_files:read_ml1m_seq",
            (6040, 3706, 1000209),
            download="ml-1m",
            raw_reader=_ML_RAW,
        ),
        DatasetSpec(
            "ml-1m-sasrec",
            "MovieLens-1M 5-core (3,416 items) in the exact order of SASRec's "
            "ml-1m.txt (stable time sort, ties in ratings.dat order), no timestamps: the "
            "ML-1M of SASRec's code (LRURec's Table 3 used its own order: ml-1m-lrurec)",
            ("ml-1m.sasrec-order.tsv.xz", "ml-1m.movies.dat.xz"),
            "shared_files:read_ml1m_sasrec",
            (6040, 3416, 999611),
        ),
        DatasetSpec(
            "ml-1m-lrurec",
            "MovieLens-1M 5-core (3,416 items) as preprocessed in the LRURec "
            "repository (its Table 3 data): time order with same-second ties by MovieID, "
            "not SASRec's order; no timestamps (download: the pinned dataset.pkl)",
            download="lrurec-ml1m",
            raw_reader="lrurec:read_preprocessed_pkl",
            stats=(6040, 3416, 999611),
        ),
        DatasetSpec(
            "ml-1m-ts",
            "MovieLens-1M raw ratings.dat of users 1-2999 only, with timestamps",
            ("ml-1m.ratings.users0001-2999.dat.xz", "ml-1m.movies.dat.xz"),
            "shared_files:read_ml1m_ts",
            (2999, 3615, 487650),
            True,
            download="ml-1m",
            raw_reader=_ML_RAW,
        ),
        DatasetSpec(
            "ml-100k",
            "MovieLens-100K u.data with timestamps, titles and genres from u.item",
            ("ml-100k.u.data.xz", "ml-100k.u.item.xz"),
            "shared_files:read_ml100k",
            (943, 1682, 100000),
            True,
            download="ml-100k",
            raw_reader=_ML_RAW,
        ),
        DatasetSpec(
            "ml-10m",
            "MovieLens-10M ratings.dat (download only)",
            download="ml-10m",
            raw_reader=_ML_RAW,
            has_time=True,
        ),
        DatasetSpec(
            "ml-20m",
            "MovieLens-20M ratings.csv (download only)",
            download="ml-20m",
            raw_reader=_ML_RAW,
            has_time=True,
        ),
        _seq(
            "amazon-beauty",
            "amazon-beauty-5core.time.tsv.xz",
            "Amazon 2014 Beauty 5-core with day timestamps",
            (22363, 12101, 198502),
            True,
            "amazon2014-beauty",
            _AMAZON_RAW,
        ),
        _seq(
            "amazon-sports",
            "amazon-sports-5core.time.tsv.xz",
            "Amazon 2014 Sports and Outdoors 5-core with day timestamps",
            (35598, 18357, 296337),
            True,
            "amazon2014-sports",
            _AMAZON_RAW,
        ),
        _with_attributes(
            "amazon-beauty-s3rec",
            "amazon-beauty-5core.s3rec.tsv.xz",
            "amazon-beauty-5core.s3rec.item_attributes.tsv.xz",
            f"Amazon Beauty 5-core, {_S3REC}{_S3REC_ATTR}",
            (22363, 12101, 198502),
        ),
        _with_attributes(
            "amazon-sports-s3rec",
            "amazon-sports-5core.s3rec.tsv.xz",
            "amazon-sports-5core.s3rec.item_attributes.tsv.xz",
            f"Amazon Sports 5-core, {_S3REC}{_S3REC_ATTR}",
            (35598, 18357, 296337),
        ),
        _with_attributes(
            "amazon-toys-s3rec",
            "amazon-toys-5core.s3rec.tsv.xz",
            "amazon-toys-5core.s3rec.item_attributes.tsv.xz",
            f"Amazon Toys 5-core, {_S3REC}{_S3REC_ATTR}",
            (19412, 11924, 167597),
        ),
        _seq(
            "amazon-videogames",
            "amazon-videogames.sasrec.tsv.xz",
            "Amazon Video Games as in SASRec (single-pass 5 filter), no timestamps",
            (31013, 23715, 287107),
        ),
        _seq(
            "amazon-beauty-bert4rec",
            "amazon-beauty.bert4rec.tsv.xz",
            "Amazon Beauty as in BERT4Rec (users >= 5, items unfiltered), no timestamps",
            (40226, 54542, 353962),
        ),
        _seq(
            "yelp2020",
            "yelp2020-5core.time.tsv.xz",
            "Yelp 2020 release, 2019 reviews, 5-core, with timestamps",
            (30431, 20033, 316354),
            True,
        ),
        _seq(
            "yelp2022",
            "yelp2022-5core.time.tsv.xz",
            "Yelp 2022 release, 2019 reviews, 5-core, with timestamps",
            (19855, 14541, 207045),
            True,
        ),
        _with_attributes(
            "yelp2020-s3rec",
            "yelp2020-5core.s3rec.tsv.xz",
            "yelp2020-5core.s3rec.item_attributes.tsv.xz",
            f"Yelp 5-core, {_S3REC}; business categories of S3-Rec",
            (30431, 20033, 316354),
        ),
        _with_attributes(
            "yelp2020-s3rec-time",
            "yelp2020-5core.s3rec.time.tsv.xz",
            "yelp2020-5core.s3rec.item_attributes.tsv.xz",
            "Yelp 5-core in the S3-Rec id space and order with real timestamps (Unix "
            "seconds, UTC); business categories of S3-Rec",
            (30431, 20033, 316354),
            True,
        ),
        _seq(
            "lastfm",
            "lastfm-hetrec.s3rec.tsv.xz",
            "Last.fm HetRec 2011 artists as in S3-Rec, no timestamps",
            (1090, 3646, 52551),
        ),
        _seq(
            "diginetica-train",
            "diginetica.srgnn.train.tsv.xz",
            "DIGINETICA sessions (SR-GNN train), sessions as users, no timestamps",
            (186670, 43097, 906140),
        ),
        _seq(
            "diginetica-test",
            "diginetica.srgnn.test.tsv.xz",
            "DIGINETICA sessions (SR-GNN test)",
            (15963, 21131, 76821),
        ),
        _seq(
            "yoochoose-train",
            "yoochoose1_64.srgnn.train.tsv.xz",
            "YOOCHOOSE 1/64 sessions (SR-GNN train), sessions as users, no timestamps",
            (116167, 17376, 486026),
        ),
        _seq(
            "yoochoose-test",
            "yoochoose1_64.srgnn.test.tsv.xz",
            "YOOCHOOSE 1/64 sessions (SR-GNN test)",
            (15285, 6362, 70737),
        ),
        DatasetSpec(
            "steam",
            "Steam reviews of Kang & McAuley (download only), day timestamps",
            download="steam",
            raw_reader="steam:read_reviews",
            has_time=True,
        ),
        *[
            DatasetSpec(
                f"amazon{y}-{c}",
                f"Amazon {y} {c} 5-core review JSON (download only)",
                download=f"amazon{y}-{c}",
                raw_reader=_AMAZON_RAW,
                has_time=True,
                terms=_NC,
            )
            for y in (2014, 2018)
            for c in ("beauty", "sports", "toys", "videogames")
        ],
        DatasetSpec(
            "yelp",
            "Yelp Open Dataset review.json (manual download)",
            ("yelp/yelp_academic_dataset_review.json",),
            "yelp:read_reviews",
            has_time=True,
        ),
    ]
}
_download.ORIGINALS.update(
    {s.name: s.download for s in DATASETS.values() if s.download is not None}
)


def _call(ref: str, *args: Any) -> Interactions:
    module, func = ref.split(":")
    return getattr(importlib.import_module(f"seqrec.data.sources.{module}"), func)(*args)


def dataset_names() -> list[str]:
    """Every dataset name :func:`load` accepts."""
    return sorted(DATASETS)


def _candidates(root: str | Path | None) -> list[Path]:
    if root is not None:
        return [Path(root).expanduser()]
    if os.environ.get("SEQREC_DATA_DIR"):
        return [Path(os.environ["SEQREC_DATA_DIR"]).expanduser()]
    # package file: <repo>/src/seqrec/data/sources/__init__.py -> <repo>/../shared/data
    return [
        Path.cwd() / ".." / "shared" / "data",
        Path(__file__).resolve().parents[4].parent / "shared" / "data",
    ]


def data_dir(root: str | Path | None = None) -> Path:
    """The shared data folder (see the module docstring); the first candidate if none exists."""
    cands = _candidates(root)
    return next((c.resolve() for c in cands if c.is_dir()), cands[0])


def describe_source(name: str, verbose: bool = False) -> str:
    """What dataset ``name`` is: one line (for ``seqrec data list``), or with ``verbose`` a few
    lines adding its file, size, time, terms and download."""
    spec = _spec(name)
    size = "{:,} users, {:,} items, {:,} interactions".format(*spec.stats) if spec.stats else ""
    if not verbose:
        tail = f" [{size}]" if size else ""
        return f"{spec.description}{tail}"
    lines = [f"{spec.name}: {spec.description}"]
    if spec.files:
        lines.append(f"  file: {spec.files[0]} (in {data_dir()})")
        if spec.reader == "shared_files:read_seq_with_attributes":
            lines.append(f"  item attributes: {spec.files[1]} (optional)")
    if size:
        lines.append(f"  {size}")
    lines.append(f"  timestamps: {'yes' if spec.has_time else 'no (file order only)'}")
    lines.append(f"  terms: {spec.terms}")
    if spec.download:
        lines.append(
            f"  download: `seqrec data download {spec.download}` "
            f"({_download.REMOTES[spec.download].urls[0]})"
        )
    return "\n".join(lines)


def _spec(name: str) -> DatasetSpec:
    if name not in DATASETS:
        raise UnknownNameError(
            f"unknown dataset {name!r}{did_you_mean(name, DATASETS)}; "
            f"known: {', '.join(dataset_names())} "
            "(or pass a path to a .csv/.tsv/.parquet file)"
        )
    return DATASETS[name]


def _load_named(spec: DatasetSpec, root: str | Path | None, use_cache: bool | None) -> Interactions:
    from seqrec.data.sources import cache

    if not spec.files and spec.download is None:  # shipped in the package
        from importlib import resources

        base = Path(str(resources.files("seqrec").joinpath("datasets", spec.name)))
        inputs = sorted(base.glob("*.xz")) if base.is_dir() else []
        if not inputs:
            return _call(spec.reader)
        return cache.cached(inputs, spec.reader, lambda: _call(spec.reader), use_cache)
    folder = data_dir(root)
    if spec.files and (folder / spec.files[0]).is_file():
        args: list[Any] = [folder / spec.files[0]]
        if spec.reader in _NAMED_READERS:
            args.append(spec.name)
        args += [folder / f if (folder / f).is_file() else None for f in spec.files[1:]]
        paths = [a for a in args if isinstance(a, Path) or a is None]
        return cache.cached(
            paths, spec.reader + ":" + spec.name, lambda: _call(spec.reader, *args), use_cache
        )
    if spec.download is not None:
        remote = _download.REMOTES[spec.download]
        for base in (folder, _download.cache_dir() / spec.download):
            raw = base / remote.target
            if raw.is_file():
                arg = raw.parent if spec.raw_reader == _ML_RAW else raw
                inputs = sorted(p for p in raw.parent.iterdir() if p.is_file())
                return cache.cached(
                    inputs,
                    f"{spec.raw_reader}:{spec.name}",
                    lambda arg=arg: _call(spec.raw_reader, arg).replace(name=spec.name),
                    use_cache,
                )
    if spec.name == "yelp":
        raise DataUnavailable(
            f"dataset 'yelp' not found under {folder}: {_download.MANUAL['yelp']}"
        )
    if spec.files:
        missing = f"no {spec.files[0]}"
    else:
        target = _download.REMOTES[spec.download].target
        missing = (
            f"no {target} there nor in the download cache {_download.cache_dir() / spec.download}"
        )
    hint = (
        f"run `seqrec data download {spec.download}`"
        if spec.download
        else "copy the file there (it is not downloadable: see the shared data README)"
    )
    raise DataUnavailable(
        f"dataset '{spec.name}' not found under {folder}: {missing}; set SEQREC_DATA_DIR or {hint}"
    )


def _sniff_json(path: Path) -> str | None:
    from seqrec.data.sources import _io

    try:
        with _io.open_binary(path) as fh:
            head = fh.read(4096)
    except (OSError, EOFError, ValueError) as exc:  # lzma.LZMAError is an Exception subclass
        raise DataError(f"cannot read {path}: {type(exc).__name__}: {exc}") from None
    first = head.split(b"\n", 1)[0]
    if b"reviewerID" in first:
        return "amazon:read_reviews_json"
    if b"business_id" in first:
        return "yelp:read_reviews"
    if b"'username'" in first or b'"username"' in first:
        return "steam:read_reviews"
    return None  # any other records: generic.read_json


def _load_path(path: Path, options: dict[str, Any]) -> Interactions:
    from seqrec.data.sources import _io, generic, movielens

    if path.suffix.lower() == ".zip":
        return _load_zip(path, options)
    if path.is_dir():
        if any((path / f).is_file() for f in ("u.data", "ratings.dat", "ratings.csv")):
            _no_options(options, path.name)
            return movielens.read_movielens_dir(path)
        inter = sorted(path.glob("*.inter"))
        if len(inter) == 1:  # a RecBole dataset folder: NAME.inter (+ NAME.item, NAME.user)
            return _load_path(inter[0], options)
        return generic.read_parts(path, **options)  # a folder of part files of one log
    plain, _ = _io.strip_compression(path)
    beside = path.with_name(plain[: -len(".inter")] + ".item") if plain.endswith(".inter") else None
    if beside is not None and beside.is_file() and "item_file" not in options:
        options = {**options, "item_file": beside}  # RecBole's titles and genres come along
    if plain == "u.data" or plain == "ratings.dat":
        _no_options(options, plain)
        return movielens.read_movielens_dir(path.parent)
    if plain.endswith((".json", ".jsonl")):
        known = None if options else _sniff_json(path)  # Amazon, Yelp and Steam review dumps
        if known is not None:
            return _call(known, path)
        allowed = set(inspect.signature(generic.read_json).parameters) - {"path"}
        if set(options) - allowed:
            raise ConfigError(
                f"unknown option(s) {sorted(set(options) - allowed)} for a JSON file; "
                f"allowed: {sorted(allowed)}"
            )
        return generic.read_json(path, **options)
    if plain.startswith("ratings_") and plain.endswith(".csv"):  # Amazon 2014 ratings-only
        _no_options(options, plain)
        return _call("amazon:read_ratings_csv", path)
    allowed = set(inspect.signature(generic.read_file).parameters) - {"path"}
    unknown = set(options) - allowed
    if unknown:
        raise ConfigError(
            f"unknown option(s) {sorted(unknown)} for a file; allowed: {sorted(allowed)}"
        )
    return generic.read_file(path, **options)


_MOVIELENS_FILES = ("u.data", "ratings.dat", "ratings.csv")


def _load_zip(path: Path, options: dict[str, Any]) -> Interactions:
    """A ``.zip`` archive as downloaded (Kaggle, GroupLens): a MovieLens folder, the one log
    file inside, or one folder of part files; extracted to a temporary folder, read as such,
    and named after the archive. Several candidate logs are an error listing them."""
    import dataclasses
    import tempfile
    import zipfile

    from seqrec.data.sources import _io, generic

    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise DataError(f"cannot read {path} as a zip archive: {exc}") from None
    with archive, tempfile.TemporaryDirectory(prefix="seqrec-zip-") as tmp:
        members = [
            m
            for m in archive.infolist()
            if not m.is_dir()
            and not m.filename.startswith("__MACOSX/")
            and not Path(m.filename).name.startswith((".", "_"))
        ]
        archive.extractall(tmp, members)  # zipfile drops absolute paths and '..' parts
        root = Path(tmp)
        files = [root / m.filename for m in members]
        lens = [f.parent for f in files if f.name in _MOVIELENS_FILES or f.suffix == ".inter"]
        logs = [
            f
            for f in files
            if (
                generic._part_kind(f) is not None
                or Path(_io.strip_compression(f)[0]).suffix.lower()
                in (".json", ".jsonl", *generic.EXCEL_EXT)
            )
            and not f.name.lower().startswith(("readme", "license", "licence", "notice"))
        ]
        try:
            if lens:
                recbole = any(f.suffix == ".inter" for f in lens[0].iterdir())
                inter = _load_path(lens[0], options if recbole else {})
            elif len(logs) == 1:
                inter = _load_path(logs[0], options)
            elif logs and len({f.parent for f in logs}) == 1:
                inter = generic.read_parts(logs[0].parent, **options)
            else:
                names = ", ".join(sorted(m.filename for m in members)[:6]) or "nothing readable"
                raise DataError(
                    f"expected one log file (or one folder of parts) inside, found "
                    f"{names}; unzip it and pass the file to read"
                )
        except DataError as exc:  # name the archive and its member, not the temporary folder
            message = str(exc).replace(f"{root}/", "").replace(str(root), "")
            raise DataError(f"{path}: {message}") from None
    return dataclasses.replace(inter, name=path.name.split(".")[0])


def _no_options(options: dict[str, Any], what: str) -> None:
    if options:
        raise ConfigError(f"{what} takes no options, got {sorted(options)}")


def load(
    name_or_path: str | Path | Any,
    root: str | Path | None = None,
    cache: bool | None = None,
    **options: Any,
) -> Interactions:
    """Load a named dataset, a file, or an in-memory table.

    Args:
        name_or_path: a name from :func:`dataset_names`, a path (a file, a GroupLens folder or
            a folder of part files of one log, :func:`.generic.read_parts`), or
            a Polars / pandas DataFrame or dict of columns (read by :func:`.tables.read_frame`
            with the file options that apply: ``columns``, ``timestamp_unit``, ...).
        root: shared data folder for names (default: see the module docstring).
        cache: keep / reuse the parsed arrays of a named dataset (see :mod:`.cache`); None
            follows ``$SEQREC_PARSE_CACHE`` (on by default). Paths are never cached.
        **options: for a path, options of :func:`.generic.read_file` (``columns``, ``sep``, ...).

    Raises:
        UnknownNameError: neither a known name nor an existing path.
        DataUnavailable: the file (or a named dataset's files) is not on this machine.
        DataError: the file is malformed (one line saying what and where).
    """
    if not isinstance(name_or_path, (str, Path)):
        from seqrec.data.sources import tables

        return tables.read_frame(name_or_path, **options)
    key = str(name_or_path)
    if key in DATASETS:
        _no_options(options, f"dataset {key!r}")
        return _load_named(DATASETS[key], root, cache)
    path = Path(key).expanduser()
    if path.exists():
        return _load_path(path, options)
    if isinstance(name_or_path, Path) or os.sep in key or "." in Path(key).name:
        raise DataUnavailable(f"file not found: {key}")
    _spec(key)  # raises UnknownNameError listing the names
    raise AssertionError("unreachable")
