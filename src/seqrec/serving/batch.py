"""Batch recommendation: a file of histories or user ids in, a file of top-k lists out.

Request files (``.csv``, ``.tsv``, ``.parquet``, ``.xlsx``; ids are read as text and matched to
the artifact's raw ids by their text) take one of three layouts, told apart by their columns:

* ``user`` only: one known user id per row, answered from the history stored in the
  artifact (``users.npz``);
* ``history`` (plus an optional ``user`` naming the row): raw item ids separated by spaces,
  commas, ``|`` or ``;``, oldest first, and ``times`` the same way (Unix seconds, one per item)
  for a model that reads time;
* ``user`` and ``item`` (plus an optional ``timestamp``): one interaction per row, grouped into
  one history per user (by timestamp when given, else file order).

Common spellings of these names (``user_id``, ``userId``, ``item_id``, ...) are accepted too,
and the names a log's reader guesses (``CustomerID``, ``product_sku``, ...).

Unknown ids follow one rule in every path (``seqrec recommend`` single and ``--input``, HTTP
single and batch, Python): an unknown history item is skipped and listed (``skipped_ids``); an
allow / deny id the model never saw is an error naming it; a user id the artifact does not store
(a new user, or one its preprocessing removed) is an error naming it, unless
``unknown_users="empty"`` (``--unknown-users empty``, ``"unknown_users": "empty"``) answers it with
the empty history's fallback ranking, marked ``fallback`` and named in a note.

The answer is one row per recommended item: ``user`` (or the request's row number), ``rank``,
``item``, ``score``, when the artifact has them ``title`` and ``categories``, and ``fallback``
(empty, or ``popularity`` where the row is the fallback ranking, whose scores are on another
scale than the model's); CSV / TSV or Parquet by the output's extension (``seqrec recommend
--input`` without ``--output``: CSV on standard output). Allow and deny lists are a comma list
or a file of ids, one per line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from seqrec.errors import ConfigError, DataError

OUT_FORMATS = {".csv": ",", ".tsv": "\t", ".parquet": None, ".pq": None}
_SPLIT = re.compile(r"[\s,|;]+")


@dataclass
class Request:
    """One history to answer: ``key`` names it in the output."""

    key: Any
    history: list[Any] | None = None
    """Raw item ids, oldest first; None means the stored history of user ``key``."""
    times: list[Any] | None = None
    """The history's times (Unix seconds or ISO dates, one per item), for models that read time."""


def read_id_list(spec: str) -> list[str]:
    """A comma list of ids, or a file holding one id per line (``#`` comments and blank
    lines ignored; a ``.csv``/``.parquet`` file gives its ``item`` or first column)."""
    path = Path(spec)
    if not path.is_file():
        ids = [s.strip() for s in spec.split(",") if s.strip()]
        if not ids:
            raise ConfigError(f"expected a comma list of item ids or a file, got {spec!r}")
        return ids
    if path.suffix.lower() in (".csv", ".tsv", ".parquet", ".pq", ".xlsx"):
        df = _read_table(path)
        col = "item" if "item" in df.columns else df.columns[0]
        return [str(v) for v in df[col].drop_nulls().to_list()]
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]


def _read_table(path: Path) -> pl.DataFrame:
    """A request or id file as text columns, read like a log (``seqrec.data.sources``): text
    compressed or not, any encoding the log readers take, the separator sniffed (a ``;`` CSV);
    Parquet; the first sheet of an ``.xlsx``."""
    from seqrec.data.sources import _io, generic, layouts

    if not path.is_file():
        raise DataError(f"file not found: {path}")
    plain, _ = _io.strip_compression(path)
    ext = Path(plain).suffix.lower()
    try:
        if ext in generic.PARQUET_EXT or ext in generic.EXCEL_EXT:
            df = pl.read_parquet(path) if ext in generic.PARQUET_EXT else generic._excel(path)[0]
            return df.with_columns(pl.col(c).cast(pl.String) for c in df.columns)
        if ext not in (".csv", ".tsv", ".txt"):
            raise DataError(
                f"cannot tell the format of {path.name}: expected .csv, .tsv, .parquet "
                "or .xlsx (text optionally .gz / .xz / .bz2)"
            )
        data = _io.read_bytes(path)
        sep = layouts.sniff_separator(data, "\t" if ext in (".tsv", ".txt") else ",")
        return pl.read_csv(data, separator=sep, infer_schema=False)
    except (pl.exceptions.PolarsError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"cannot read {path}: {first}") from None


def read_requests(path: str | Path) -> list[Request]:
    """The requests of a batch file (see the module docstring for the layouts)."""
    path = Path(path)
    df = _read_table(path)
    if df.height == 0:
        raise DataError(f"{path} has no rows")
    header = list(df.columns)
    df = _canonical(df, str(path))
    cols = set(df.columns)
    if "history" in cols:
        keys = df["user"].to_list() if "user" in cols else list(range(df.height))
        # "times" (a name _canonical may have read as the timestamp column)
        col = next((c for c in ("times", "timestamp") if c in cols), None)
        times = df[col].cast(pl.String).to_list() if col else [None] * df.height
        return [
            Request(
                k,
                [t for t in _SPLIT.split(h or "") if t],
                None if ts is None else [t for t in re.split(r"[\s,|;]+", ts) if t],
            )
            for k, h, ts in zip(keys, df["history"].to_list(), times, strict=True)
        ]
    if "user" in cols and "item" in cols:
        df = df.with_row_index("_row")
        if "timestamp" in cols:
            df = df.with_columns(pl.col("timestamp").cast(pl.Float64, strict=False))
            order = ["user", "timestamp", "_row"]
        else:
            order = ["user", "_row"]
        first = df.group_by("user").agg(pl.col("_row").min().alias("_first"))
        df = df.join(first, on="user").sort(["_first", *order[1:]])
        if "timestamp" in cols and df["timestamp"].null_count() == 0:
            grouped = df.group_by("user", maintain_order=True).agg(
                pl.col("item"), pl.col("timestamp").cast(pl.Int64)
            )
            return [Request(u, list(items), list(ts)) for u, items, ts in grouped.iter_rows()]
        grouped = df.group_by("user", maintain_order=True).agg(pl.col("item"))
        return [Request(u, list(items)) for u, items in grouped.iter_rows()]
    if "user" in cols:
        return [Request(u) for u in df["user"].to_list()]
    raise DataError(
        f"{path}: expected a 'user' column (stored histories), a 'history' column "
        f"or 'user' + 'item' columns (common aliases such as user_id or sku are read "
        f"as those); columns present: {', '.join(header)}; rename yours to these names "
        "in the file's header"
    )


def _canonical(df: pl.DataFrame, source: str = "the batch file") -> pl.DataFrame:
    """Rename a common user / item / timestamp column name (``user_id``, ``itemId``, and the
    names a log's reader guesses, ``CustomerID``, ``product_sku``...) to the role name when the
    role name itself is absent."""
    from seqrec.data.sources.columns import ALIASES, guess_column

    renames: dict[str, str] = {}
    for role in ("user", "item", "timestamp"):
        if role not in df.columns:
            free = [
                c
                for c in df.columns
                if c not in renames and c not in ("user", "item", "timestamp", "history")
            ]
            found = next((c for c in ALIASES[role] if c in free), None) or guess_column(
                role, free, source
            )
            if found is not None:
                renames[found] = role
    return df.rename(renames) if renames else df


def describe_skipped(vocab: Any, ids: list[Any]) -> str:
    """``'x' (removed by preprocessing), 'y' (never seen)``: why each id was skipped."""
    parts = []
    for r in ids[:10]:
        why = "removed by preprocessing" if vocab.is_removed(r) else "never seen"
        parts.append(f"{r!r} ({why})")
    return ", ".join(parts) + (f" (+{len(ids) - 10} more)" if len(ids) > 10 else "")


UNKNOWN_USERS = ("error", "empty")


def histories_of(
    model: Any, requests: list[Request], unknown_users: str = "error"
) -> list[list[Any]]:
    """Raw histories of ``requests``, stored ones looked up in the artifact. A user id the
    artifact does not store raises ``DataError`` naming it (``unknown_users="error"``) or gets an
    empty history (``"empty"``: the model's fallback ranking, for batches where one new user
    should not stop the others; :func:`unknown_user_summary` says who)."""
    if unknown_users not in UNKNOWN_USERS:
        raise ConfigError(
            f"unknown_users must be one of {', '.join(UNKNOWN_USERS)}, got {unknown_users!r}"
        )
    wanted = [r.key for r in requests if r.history is None]
    stored: dict[Any, list[Any]] = {}
    if wanted:
        users = getattr(model, "user_histories", None)
        if users is None:
            raise DataError(
                "this artifact stores no user histories (save it with "
                "`seqrec train`, or pass histories instead of user ids)"
            )
        if unknown_users == "empty":
            wanted = [u for u in wanted if u in users]
        stored = dict(zip(map(str, wanted), users.raw_histories(wanted, model.vocab), strict=True))
    return [r.history if r.history is not None else stored.get(str(r.key), []) for r in requests]


def unknown_user_summary(model: Any, requests: list[Request]) -> str | None:
    """One line about the user ids of ``requests`` the artifact does not store (None if none)."""
    users = getattr(model, "user_histories", None)
    if users is None:
        return None
    unknown = list(
        dict.fromkeys(r.key for r in requests if r.history is None and r.key not in users)
    )
    if not unknown:
        return None
    removed = set(users.removed.tolist())
    parts = [
        f"{u!r} ({'removed by preprocessing' if str(u) in removed else 'never seen'})"
        for u in unknown[:10]
    ]
    more = f" (+{len(unknown) - 10} more)" if len(unknown) > 10 else ""
    return (
        f"{len(unknown)} user id(s) unknown to the artifact got the popularity ranking (an "
        f"empty history): {', '.join(parts)}{more}"
    )


def recommend_requests(
    model: Any,
    requests: list[Request],
    k: int = 10,
    exclude_seen: bool = True,
    allow: list[Any] | None = None,
    deny: list[Any] | None = None,
    chunk: int = 512,
    unknown_users: str = "error",
) -> list[Any]:
    """``Recommendation`` of each request, scored ``chunk`` histories at a time
    (``unknown_users``: see :func:`histories_of`)."""
    histories = histories_of(model, requests, unknown_users)
    times = times_of(model, requests, histories)
    out = []
    for start in range(0, len(histories), chunk):
        out += model.recommend(
            histories[start : start + chunk],
            k=k,
            exclude_seen=exclude_seen,
            allow=allow,
            deny=deny,
            times=None if times is None else times[start : start + chunk],
        )
    return out


def times_of(model: Any, requests: list[Request], histories: list[list[Any]]) -> list[Any] | None:
    """The times of each request's history, for a model that reads time (None for the others):
    a stored user's stored times, a given history's ``times``. A history without them is a
    ``DataError`` naming the request: scored by positions alone it would be silently worse."""
    if not getattr(model, "reads_time", False):
        return None
    users = getattr(model, "user_histories", None)
    out: list[Any] = []
    for req, hist in zip(requests, histories, strict=True):
        if req.history is None:
            stored = users.times_of([req.key]) if users is not None and req.key in users else None
            out.append(stored[0] if stored else ([] if not hist else None))
        else:
            out.append(req.times if req.times is not None else ([] if not hist else None))
        if out[-1] is None:
            who = "the history" if req.key == "-" else f"the history of {req.key!r}"
            raise DataError(
                f"{model.name} reads each history's timestamps: {who} comes without them "
                "(give its times, one per item: --times on the command line, a 'times' "
                'column in a batch file, "times" over HTTP)'
            )
    return out


def to_frame(model: Any, requests: list[Request], recs: list[Any]) -> pl.DataFrame:
    """The long answer table (user, rank, item, score[, title, categories], fallback);
    ``fallback`` is empty for the model's own rankings and names the fallback otherwise."""
    vocab = model.vocab
    cols: dict[str, list] = {"user": [], "rank": [], "item": [], "score": []}
    titles = vocab.titles is not None
    cats = getattr(vocab, "categories", None) is not None
    if titles:
        cols["title"] = []
    if cats:
        cols["categories"] = []
    # the rows that are not the model's scores (an empty history or a user the artifact does
    # not store: the popularity ranking, whose scores are counts, not logits)
    fallback: list[str | None] = []
    for req, rec in zip(requests, recs, strict=True):
        internal = vocab.encode(rec.items) if (titles or cats) and rec.items else []
        for rank, (item, score) in enumerate(zip(rec.items, rec.scores, strict=True), 1):
            cols["user"].append(str(req.key))
            cols["rank"].append(rank)
            cols["item"].append(str(item.item() if hasattr(item, "item") else item))
            cols["score"].append(float(score))
            if titles:
                cols["title"].append(vocab.title(int(internal[rank - 1])))
            if cats:
                cols["categories"].append(vocab.category(int(internal[rank - 1])))
            fallback.append(rec.fallback)
    cols["fallback"] = fallback
    return pl.DataFrame(
        cols, schema_overrides={"rank": pl.Int32, "score": pl.Float32, "fallback": pl.String}
    )


def write_table(df: pl.DataFrame, path: str | Path) -> Path:
    """Write ``df`` as CSV / TSV / Parquet by the extension of ``path``."""
    path = Path(path)
    ext = path.suffix.lower()
    if ext not in OUT_FORMATS:
        raise ConfigError(f"output must end in {', '.join(OUT_FORMATS)}, got {path.name}")
    path.parent.mkdir(parents=True, exist_ok=True)
    if OUT_FORMATS[ext] is None:
        df.write_parquet(path)
    else:
        df.write_csv(path, separator=OUT_FORMATS[ext])
    return path


def ranking_summary(model: Any, recs: list[Any]) -> str | None:
    """One line on how the batch was ranked when the artifact has an item index (else None)."""
    if getattr(model, "index", None) is None:
        return None
    by_index = sum(1 for r in recs if getattr(r, "ranking", "exact") == "index")
    exact = sum(1 for r in recs if r.fallback is None) - by_index
    return f"{by_index} of {len(recs)} requests ranked with the item index (approximate)" + (
        f"; {exact} ranked exactly (the filters left the index too few candidates)" if exact else ""
    )


def skipped_summary(model: Any, recs: list[Any]) -> str | None:
    """One line about the history ids skipped over the whole batch (None if none)."""
    seen: dict[Any, None] = {}  # ordered set
    for rec in recs:
        seen.update(dict.fromkeys(getattr(rec, "skipped_ids", [])))
    ids = list(seen)
    if not ids:
        return None
    n = sum(1 for rec in recs if rec.skipped_unknown)
    return (
        f"skipped unknown item id(s) in {n} histor{'y' if n == 1 else 'ies'}: "
        f"{describe_skipped(model.vocab, ids)}"
    )
