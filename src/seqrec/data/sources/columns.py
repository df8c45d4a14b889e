"""Which columns of a log play the user, item, timestamp and rating roles (and an item file's
item, title and categories): an explicit mapping, else a known name (:data:`ALIASES`), else the
one column whose name contains a role's word (:data:`KEYWORDS`). Shared by every reader of
tables: text and Parquet files, JSON records, in-memory frames and batch request files."""

from __future__ import annotations

from collections.abc import Mapping

from seqrec.errors import ConfigError, DataError

ROLES = ("user", "item", "timestamp", "rating")
ALIASES: dict[str, tuple[str, ...]] = {
    "user": (
        "user_id",
        "userId",
        "user",
        "userID",
        "UserID",
        "uid",
        "session_id",
        "sessionId",
        "session",
        "reviewerID",
        "username",
        "visitorid",
    ),
    # parent_asin before asin: Amazon Reviews'23 files carry both, and its parent_asin is what
    # the earlier Amazon datasets (and the papers' Beauty / Sports) call asin: the product
    # across colours and sizes, the id its metadata is keyed by.
    "item": (
        "item_id",
        "itemId",
        "item",
        "itemID",
        "movieId",
        "MovieID",
        "movie_id",
        "iid",
        "parent_asin",
        "asin",
        "product_id",
        "productId",
        "business_id",
        "track_id",
        "artist_id",
        "sku",
    ),
    "timestamp": (
        "timestamp",
        "Timestamp",
        "time",
        "ts",
        "unixReviewTime",
        "datetime",
        "date",
        "event_time",
        "t_dat",
        "ds",
    ),
    "rating": ("rating", "Rating", "overall", "stars", "score"),
}
ITEM_ROLES = ("item", "title", "categories", "vector")
ITEM_ALIASES: dict[str, tuple[str, ...]] = {
    "item": ALIASES["item"],
    "title": ("title", "Title", "name", "item_name", "product_name", "movie_title"),
    "categories": ("categories", "category", "genres", "genre", "tags"),
    # numbers of one embedding per item (seqrec.data.item_vectors); named, never guessed
    "vector": ("vector", "item_vector"),
}
# Second chance for a column no alias names exactly: its name lower-cased without separators
# ("CustomerID", "customer-id" -> "customerid"), matched against the aliases the same way, then
# against the words below; used only when exactly one column matches (several: an error listing
# them). The mapping read is printed among the data's notes, so a guess is always visible.
KEYWORDS: dict[str, tuple[str, ...]] = {
    "user": (
        "user",
        "customer",
        "client",
        "visitor",
        "member",
        "buyer",
        "account",
        "session",
        "reviewer",
    ),
    "item": (
        "item",
        "product",
        "sku",
        "article",
        "movie",
        "book",
        "song",
        "track",
        "video",
        "artist",
        "business",
        "stockcode",
        "course",
        "asin",
        "recipe",
        "listing",
    ),
    "timestamp": ("timestamp", "datetime", "date", "time", "created"),
    "rating": ("rating", "stars"),
}


# A column named for an amount of time ("watch_time", "time_spent") is no point in time: a
# timestamp is never guessed from such a name (ordering histories by durations would be silent).
DURATION_WORDS = (
    "duration",
    "spent",
    "elapsed",
    "length",
    "watch",
    "dwell",
    "play",
    "seconds",
    "minutes",
    "hours",
    "secs",
    "mins",
)


def normalize_name(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def guess_column(role: str, free: list[str], source: str) -> str | None:
    """The one column of ``free`` whose normalized name is an alias of ``role``, else the one
    that contains one of its :data:`KEYWORDS`; None when none does; an error when several do."""
    aliases = {normalize_name(a) for a in ALIASES[role]}
    if role == "timestamp":
        free = [c for c in free if not any(w in normalize_name(c) for w in DURATION_WORDS)]
    for candidates in (
        [c for c in free if normalize_name(c) in aliases],
        [c for c in free if any(w in normalize_name(c) for w in KEYWORDS[role])],
    ):
        if len(candidates) == 1:
            return candidates[0]
        if len(candidates) > 1:
            raise DataError(
                f"{source}: several columns could be the {role} "
                f"({', '.join(candidates)}); name the one to use: "
                f"columns={{'{role}': '<name>'}} (from the CLI: --set "
                f"data.columns={role}=<name>)"
            )
    return None


def resolve_columns(
    columns: Mapping[str, str | None] | None, present: list[str], source: str
) -> dict[str, str]:
    columns = dict(columns or {})
    unknown = set(columns) - set(ROLES)
    if unknown:
        raise ConfigError(
            f"columns keys must be among {', '.join(ROLES)} (and 'event' for "
            f"the kinds of event: data.events), got {sorted(unknown)}"
        )
    out = {}
    for role in ROLES:
        if role in columns:
            if columns[role] is None and role in ("timestamp", "rating"):
                continue  # explicitly absent
            if columns[role] not in present:
                raise DataError(
                    f"{source} has no column '{columns[role]}' (mapped to {role}; "
                    f"columns present: {', '.join(present)})"
                )
            out[role] = columns[role]
            continue
        found = next((c for c in ALIASES[role] if c in present), None)
        if found is None:
            found = guess_column(role, [c for c in present if c not in out.values()], source)
        if found is None and role in ("user", "item"):
            raise DataError(
                f"{source}: no {role} column (columns present: {', '.join(present)}); "
                f"pass columns={{'{role}': '<name>'}} (or has_header=False, names=[...] for a "
                f"file without a header line; from the CLI: --set data.columns={role}=<name>, "
                "--set data.names=a,b,c)"
            )
        if found is None and role == "timestamp" and "timestamp" not in columns:
            raise DataError(
                f"{source}: no timestamp column (columns present: {', '.join(present)}); pass "
                "columns={'timestamp': '<name>'}, or columns={'timestamp': None} if the rows are "
                "in time order and the file order should serve as time (from the CLI: --set "
                "data.columns=timestamp=<name> or timestamp=none)"
            )
        if found is not None:
            out[role] = found
    return out


# A column of a few kinds of event (RetailRocket's view / addtocart / transaction, a shop's
# click / purchase): ignoring it silently counts a view as much as a purchase, so the note that
# names ignored columns shows its values.
EVENT_WORDS = ("event", "type", "action", "behavior", "behaviour", "interaction", "kind")
DUPLICATE_MARK = "_duplicated_"


def find_event_column(df, source: str) -> str | None:
    """The one text column whose name says it holds kinds of event (None when there is none)."""
    import polars as pl

    found = [
        c
        for c in df.columns
        if df.schema[c] == pl.String and any(w in normalize_name(c) for w in EVENT_WORDS)
    ]
    if len(found) > 1:
        raise DataError(
            f"{source}: several columns could hold the kinds of event ({', '.join(found)}); "
            "name it: columns={'event': '<name>'} (from the CLI: --set data.columns=event=<name>)"
        )
    return found[0] if found else None


def keep_events(df, events, column: str | None, source: str):
    """``df`` with the rows whose event column holds one of ``events``, the note saying so, and
    the column used; a kind the column never holds is an error listing those it holds."""
    import polars as pl

    column = column or find_event_column(df, source)
    if column is None or column not in df.columns:
        raise DataError(
            f"{source}: events={list(events)} needs a column of kinds of event "
            f"(columns present: {', '.join(df.columns)}); name it: columns={{'event': '<name>'}}"
        )
    wanted = [str(e).strip() for e in events if str(e).strip()]
    counts = dict(df[column].cast(pl.String).value_counts().iter_rows())
    missing = [e for e in wanted if e not in counts]
    if missing:
        raise DataError(
            f"{source}: column '{column}' holds no {', '.join(map(repr, missing))}; it holds "
            + ", ".join(f"{k} ({n:,})" for k, n in sorted(counts.items(), key=lambda kv: -kv[1]))
        )
    kept = df.filter(pl.col(column).cast(pl.String).is_in(wanted))
    note = (
        f"kept the rows whose {column} is {', '.join(wanted)}: {kept.height:,} of {df.height:,} "
        f"(dropped {', '.join(f'{k} {n:,}' for k, n in counts.items() if k not in wanted) or 'none'})"
    )
    return kept, note, column


def ignored_note(df, roles: Mapping[str, str]) -> str | None:
    """The note naming every column of ``df`` that plays no role (None when all are used): an
    event-like text column with its values and counts, a header's repeated name as such."""
    import polars as pl

    used = set(roles.values())
    parts = []
    for col in df.columns:
        if col in used:
            continue
        if DUPLICATE_MARK in col:  # polars' name for a header's second column of one name
            first = col.split(DUPLICATE_MARK)[0]
            role = next((r for r, c in roles.items() if c == first), None)
            parts.append(
                f"{col} (the header names '{first}' twice; the first one"
                + (f" is the {role})" if role else " is kept)")
            )
            continue
        series = df[col]
        if any(w in normalize_name(col) for w in EVENT_WORDS) and series.dtype == pl.String:
            counts = series.value_counts(sort=True)
            if counts.height <= 20:
                shown = ", ".join(f"{v} {n:,}" for v, n in counts.iter_rows())
                parts.append(
                    f"{col} ({shown}: every row counts the same, whatever its {col}; "
                    f"data.events=KIND,KIND keeps only those kinds)"
                )
                continue
        parts.append(col)
    if not parts:
        return None
    return f"ignored column{'s' if len(parts) > 1 else ''}: " + "; ".join(parts)
