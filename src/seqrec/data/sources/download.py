"""Download the original datasets from their official hosts (for users who are online).

Files land in the cache directory, ``$SEQREC_CACHE_DIR`` or ``~/.cache/seqrec``, as
``<cache>/<name>/<file>`` (zips are extracted beside the archive). Every download streams to a
temporary file in the same folder, is hashed on the way, and is renamed into place only when
complete and verified, so an interrupted download never leaves a half file under the final name.

Checksums: :data:`REMOTES` stores a sha256 only where it is known for certain (the pinned
LRURec file; the other hosts publish none). An unknown checksum is recorded on first download in
``<file>.sha256`` and logged; a later download is checked against that record; a caller can
always pass ``sha256=`` to enforce one. Only :mod:`urllib` is used.

Yelp is not downloadable: its terms must be accepted on the Yelp site (see :data:`MANUAL`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import socket
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from seqrec.errors import DataError, UnknownNameError

log = logging.getLogger(__name__)

_GROUPLENS = "https://files.grouplens.org/datasets/movielens/"
_SNAP = "http://snap.stanford.edu/data/amazon/productGraph/categoryFiles/"
_AMAZON18 = "https://mcauleylab.ucsd.edu/public_datasets/data/amazon_v2/categoryFilesSmall/"
_GROUPLENS_TERMS = "GroupLens terms: research use, no redistribution, cite Harper & Konstan 2015"
_AMAZON_TERMS = "McAuley lab Amazon data: non-commercial research use"


@dataclass(frozen=True)
class Remote:
    """One downloadable original."""

    urls: tuple[str, ...]
    """Official URL first, then mirrors tried in order."""
    target: str
    """Path, relative to ``<cache>/<name>/``, of the file a reader opens after download."""
    sha256: str | None = None
    """Known sha256 of the downloaded file (None: unknown, recorded on first download)."""
    terms: str = ""
    """Licence / terms of use, shown before downloading."""

    @property
    def filename(self) -> str:
        return Path(urlparse(self.urls[0]).path).name

    @property
    def is_zip(self) -> bool:
        return self.filename.endswith(".zip")


def _amazon(host: str, file: str, terms: str = _AMAZON_TERMS) -> Remote:
    return Remote((host + file,), file, terms=terms)


REMOTES: dict[str, Remote] = {
    "ml-100k": Remote((_GROUPLENS + "ml-100k.zip",), "ml-100k/u.data", terms=_GROUPLENS_TERMS),
    "ml-1m": Remote((_GROUPLENS + "ml-1m.zip",), "ml-1m/ratings.dat", terms=_GROUPLENS_TERMS),
    "ml-10m": Remote(
        (_GROUPLENS + "ml-10m.zip",), "ml-10M100K/ratings.dat", terms=_GROUPLENS_TERMS
    ),
    "ml-20m": Remote((_GROUPLENS + "ml-20m.zip",), "ml-20m/ratings.csv", terms=_GROUPLENS_TERMS),
    "ml-latest-small": Remote(
        (_GROUPLENS + "ml-latest-small.zip",),
        "ml-latest-small/ratings.csv",
        terms="GroupLens terms: research use, redistribution under the same terms",
    ),
    "amazon2014-beauty": _amazon(_SNAP, "reviews_Beauty_5.json.gz"),
    "amazon2014-sports": _amazon(_SNAP, "reviews_Sports_and_Outdoors_5.json.gz"),
    "amazon2014-toys": _amazon(_SNAP, "reviews_Toys_and_Games_5.json.gz"),
    "amazon2014-videogames": _amazon(_SNAP, "reviews_Video_Games_5.json.gz"),
    "amazon2014-beauty-ratings": _amazon(_SNAP, "ratings_Beauty.csv"),
    "amazon2018-beauty": _amazon(_AMAZON18, "All_Beauty_5.json.gz"),
    "amazon2018-sports": _amazon(_AMAZON18, "Sports_and_Outdoors_5.json.gz"),
    "amazon2018-toys": _amazon(_AMAZON18, "Toys_and_Games_5.json.gz"),
    "amazon2018-videogames": _amazon(_AMAZON18, "Video_Games_5.json.gz"),
    # the LRURec paper's preprocessed ML-1M (its Table 3 data; see sources/lrurec.py), pinned
    "lrurec-ml1m": Remote(
        (
            "https://raw.githubusercontent.com/yueqirex/LRURec/15c172321af09d80c0a96e15696a9279bdd6dfd1/"
            "data/preprocessed/ml-1m_min_rating0-min_uc5-min_sc5-leave_one_out/dataset.pkl",
        ),
        "dataset.pkl",
        sha256="e3ed8339a0f7a63d9612a08347161ca209610d416b526c489e10dec627644d3d",
        terms=_GROUPLENS_TERMS + " (MovieLens-1M as preprocessed by the LRURec authors)",
    ),
    "steam": Remote(
        (
            "https://mcauleylab.ucsd.edu/public_datasets/data/steam/steam_reviews.json.gz",
            "http://cseweb.ucsd.edu/~wckang/steam_reviews.json.gz",
        ),
        "steam_reviews.json.gz",
        terms="UCSD Steam data: non-commercial research use",
    ),
}
MANUAL: dict[str, str] = {
    "yelp": "Yelp data cannot be downloaded automatically: accept the Yelp Dataset Terms of Use "
    "and download it by hand from https://www.yelp.com/dataset, then place "
    "yelp_academic_dataset_review.json under $SEQREC_DATA_DIR/yelp/ (or pass its path)",
}
ORIGINALS: dict[str, str] = {}
"""Dataset name -> the key of :data:`REMOTES` holding its original (``ml-1m-ts`` -> ``ml-1m``).
Filled by :mod:`seqrec.data.sources` from its dataset table (the package is always imported
before this module), so that this module does not import the package back."""


def cache_dir() -> Path:
    """``$SEQREC_CACHE_DIR`` if set, else ``~/.cache/seqrec``."""
    env = os.environ.get("SEQREC_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "seqrec"


def downloaded(name: str, cache: str | Path | None = None) -> Path | None:
    """Path of the already-downloaded original of ``name``, or None."""
    remote = REMOTES.get(name)
    if remote is None:
        return None
    path = Path(cache or cache_dir()) / name / remote.target
    return path if path.is_file() else None


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch(
    url: str,
    dest: str | Path,
    sha256: str | None = None,
    progress: Callable[[int, int | None], None] | None = None,
    timeout: float = 60.0,
) -> str:
    """Download ``url`` to ``dest`` atomically and return its sha256.

    Args:
        url: http(s) or file URL.
        dest: final path; written only after a complete, verified download.
        sha256: expected hex digest; a mismatch raises ``DataError`` and keeps nothing.
        progress: called as ``progress(bytes_so_far, total_or_None)``.
        timeout: socket timeout in seconds.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    host = urlparse(url).netloc or url
    fd, tmp_name = tempfile.mkstemp(prefix=dest.name + ".", suffix=".part", dir=dest.parent)
    tmp = Path(tmp_name)
    h = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                request = urllib.request.Request(url, headers={"User-Agent": "seqrec"})
                with urllib.request.urlopen(request, timeout=timeout) as resp:
                    total = resp.headers.get("Content-Length") if resp.headers else None
                    total = int(total) if total and str(total).isdigit() else None
                    done = 0
                    while True:
                        block = resp.read(1 << 20)
                        if not block:
                            break
                        out.write(block)
                        h.update(block)
                        done += len(block)
                        if progress is not None:
                            progress(done, total)
            except urllib.error.HTTPError as exc:
                raise DataError(f"download of {url} failed: HTTP {exc.code} {exc.reason}") from None
            except (urllib.error.URLError, socket.timeout, ConnectionError) as exc:
                reason = getattr(exc, "reason", exc)
                raise DataError(
                    f"cannot reach {host} ({reason}): you appear to be offline; place the file "
                    f"at {dest} or set SEQREC_DATA_DIR"
                ) from None
        digest = h.hexdigest()
        if sha256 is not None and digest != sha256.lower():
            raise DataError(
                f"sha256 mismatch for {url}: expected {sha256}, got {digest}; the file was not kept"
            )
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return digest


def extract_zip(archive: Path, into: Path) -> None:
    """Extract ``archive`` into ``into``, refusing members that would escape it."""
    into.mkdir(parents=True, exist_ok=True)
    try:
        with zipfile.ZipFile(archive) as zf:
            for member in zf.namelist():
                p = Path(member)
                if p.is_absolute() or ".." in p.parts:
                    raise DataError(f"{archive.name}: refusing unsafe member path {member!r}")
            staging = Path(tempfile.mkdtemp(prefix=".extract-", dir=into))
            try:
                zf.extractall(staging)
                for child in staging.iterdir():
                    final = into / child.name
                    if final.exists():
                        shutil.rmtree(final) if final.is_dir() else final.unlink()
                    os.replace(child, final)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    except zipfile.BadZipFile as exc:
        raise DataError(f"{archive} is not a valid zip file ({exc})") from None


def download(
    name: str,
    cache: str | Path | None = None,
    force: bool = False,
    sha256: str | None = None,
    progress: Callable[[int, int | None], None] | None = None,
) -> Path:
    """Download (if needed) and unpack dataset ``name``; return the file a reader opens.

    Raises:
        UnknownNameError: ``name`` has no download (the message lists those that do).
        DataError: offline, HTTP error or checksum mismatch (one line, says what to do).
    """
    if name in MANUAL:
        raise DataError(MANUAL[name])
    if name not in REMOTES and name in ORIGINALS:  # a dataset whose original is downloadable
        return download(ORIGINALS[name], cache, force, sha256, progress)
    if name not in REMOTES:
        raise UnknownNameError(
            f"no download for dataset {name!r}; downloadable: {', '.join(sorted(REMOTES))}"
        )
    remote = REMOTES[name]
    folder = Path(cache or cache_dir()) / name
    target = folder / remote.target
    if target.is_file() and not force:
        return target
    log.info("downloading %s (%s)", name, remote.terms)
    archive = folder / remote.filename
    record = archive.with_name(archive.name + ".sha256")
    expected = sha256 or remote.sha256
    if expected is None and record.is_file():
        expected = record.read_text().split()[0]
    errors = []
    for url in remote.urls:
        try:
            digest = fetch(url, archive, expected, progress)
            break
        except DataError as exc:
            errors.append(exc)
            if "mismatch" in str(exc):
                raise
    else:
        raise errors[-1] if len(errors) == 1 else DataError("; ".join(map(str, errors)))
    if remote.sha256 is None:
        record.write_text(f"{digest}  {archive.name}\n")
        log.info("%s sha256 %s (recorded in %s)", archive.name, digest, record)
    if remote.is_zip:
        extract_zip(archive, folder)
    if not target.is_file():
        raise DataError(f"downloaded {remote.filename} but {remote.target} is not in it")
    return target
