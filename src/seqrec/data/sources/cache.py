"""Parse cache: a named dataset, once parsed, is kept as Parquet so later loads skip the xz
decompression and text parsing, which dominate a cold load.

Entries live in ``<cache>/parsed/`` (``$SEQREC_CACHE_DIR`` or ``~/.cache/seqrec``). The key is a
hash of the cache format, the reader, and the absolute path, size and modification time of every
input file, so editing or replacing a file invalidates its entry. Each entry is up to four files:
``<key>.parquet`` (user, item, timestamp[, rating]), ``<key>.items.parquet`` (side table, if
any), ``<key>.attributes.parquet`` (item attributes, if any) and ``<key>.json`` (name, has_time,
notes), each written to a temporary file and renamed;
the JSON is written last and marks the entry complete. No pickle anywhere. A cache that cannot
be written (read-only home) or read (corrupt entry) is logged and ignored: the file is parsed.

Disable with ``SEQREC_PARSE_CACHE=0`` (or ``load(..., cache=False)``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import polars as pl

from seqrec.data.interactions import Interactions
from seqrec.data.sources.download import cache_dir

log = logging.getLogger(__name__)
FORMAT = 1


def enabled(flag: bool | None = None) -> bool:
    """``flag`` if given, else ``$SEQREC_PARSE_CACHE`` (default on; ``0/false/no/off`` = off)."""
    if flag is not None:
        return flag
    return os.environ.get("SEQREC_PARSE_CACHE", "1").strip().lower() not in (
        "0",
        "false",
        "no",
        "off",
    )


def key(inputs: Sequence[Path | None], reader: str) -> str:
    parts: list = [FORMAT, reader]
    for p in inputs:
        if p is None:
            parts.append(None)
            continue
        st = Path(p).stat()
        parts.append([str(Path(p).resolve()), st.st_size, st.st_mtime_ns])
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]


def _folder() -> Path:
    return cache_dir() / "parsed"


def get(k: str) -> Interactions | None:
    folder = _folder()
    meta_path = folder / f"{k}.json"
    if not meta_path.is_file():
        return None
    try:
        meta = json.loads(meta_path.read_text())
        df = pl.read_parquet(folder / f"{k}.parquet")
        items = None
        if meta["has_items"]:
            side = pl.read_parquet(folder / f"{k}.items.parquet")
            items = {c: side[c].to_numpy() for c in side.columns}
        attributes = None
        if meta.get("has_attributes"):
            from seqrec.data.attributes import ItemAttributes

            att = pl.read_parquet(folder / f"{k}.attributes.parquet")
            attributes = ItemAttributes(
                att["item"].to_numpy(),
                att["attribute"].to_numpy(),
                att["kind"].to_numpy(),
                att["position"].to_numpy(),
            )
        return Interactions(
            user=df["user"].to_numpy(),
            item=df["item"].to_numpy(),
            timestamp=df["timestamp"].to_numpy(),
            rating=df["rating"].to_numpy() if "rating" in df.columns else None,
            items=items,
            has_time=meta["has_time"],
            name=meta["name"],
            notes=tuple(meta["notes"]),  # identical to a fresh parse: results must not differ
            item_attributes=attributes,
        )
    except Exception as exc:  # a broken entry must never break loading: reparse instead
        log.warning("ignoring unreadable parse-cache entry %s: %s", k, exc)
        return None


def _atomic(path: Path, write: Callable[[Path], None]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


def put(k: str, inter: Interactions) -> None:
    folder = _folder()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        cols = {"user": inter.user, "item": inter.item, "timestamp": inter.timestamp}
        if inter.rating is not None:
            cols["rating"] = inter.rating
        _atomic(
            folder / f"{k}.parquet",
            lambda p: pl.DataFrame(cols).write_parquet(p, compression="lz4"),
        )
        if inter.items is not None:
            side = pl.DataFrame({c: pl.Series(c, v, strict=False) for c, v in inter.items.items()})
            _atomic(
                folder / f"{k}.items.parquet", lambda p: side.write_parquet(p, compression="lz4")
            )
        att = inter.item_attributes
        if att is not None:
            frame = pl.DataFrame(
                {
                    "item": att.item,
                    "attribute": att.attribute,
                    "kind": att.kind.astype(object),
                    "position": att.position,
                }
            )
            _atomic(
                folder / f"{k}.attributes.parquet",
                lambda p: frame.write_parquet(p, compression="lz4"),
            )
        meta = {
            "name": inter.name,
            "has_time": inter.has_time,
            "notes": list(inter.notes),
            "has_items": inter.items is not None,
            "has_attributes": att is not None,
            "format": FORMAT,
        }
        _atomic(folder / f"{k}.json", lambda p: p.write_text(json.dumps(meta)))
    except Exception as exc:  # caching is an optimisation: never fail a load because of it
        log.warning("could not write the parse cache in %s: %s", folder, exc)


def cached(
    inputs: Sequence[Path | None],
    reader: str,
    parse: Callable[[], Interactions],
    use: bool | None = None,
) -> Interactions:
    """``parse()``, or its cached result for these exact input files."""
    if not enabled(use):
        return parse()
    try:
        k = key(inputs, reader)
    except OSError:
        return parse()
    hit = get(k)
    if hit is not None:
        log.debug("loaded %s from the parse cache (%s)", hit.name, k)
        return hit
    inter = parse()
    put(k, inter)
    return inter


def clear() -> int:
    """Delete every parse-cache entry; returns how many files were removed."""
    folder = _folder()
    if not folder.is_dir():
        return 0
    removed = 0
    for f in folder.iterdir():
        if f.is_file() and (f.suffix in (".parquet", ".json", ".tmp")):
            f.unlink(missing_ok=True)
            removed += 1
    return removed
