"""How a text log is laid out, guessed from its first lines: its separator, whether its first
line is names or data, RecBole's typed header, the one-user-a-line files of the S3-Rec code.
Every guess is returned for the reader's notes (a guess is always shown), and a file that
matches none gets a hint instead of a silent misreading."""

from __future__ import annotations

import re

import polars as pl

from seqrec.data.sources import _io
from seqrec.data.sources.columns import ALIASES, KEYWORDS, normalize_name
from seqrec.errors import DataError

_WHOLE_NUMBERS = re.compile(rb"\d+( \d+)+")


def is_user_item_lists(data: bytes) -> bool:
    """Lines of whole numbers split by single spaces, of varying length: S3-Rec's (FMLP-Rec's,
    ICLRec's) ``Beauty.txt``, ``user item item ...``, one user a line."""
    lines = [ln.rstrip(b"\r") for ln in _io.head_lines(data, 20) if ln.strip()]
    return (
        len(lines) > 1
        and all(_WHOLE_NUMBERS.fullmatch(ln) for ln in lines)
        and len({ln.count(b" ") for ln in lines}) > 1
    )


def user_item_lists(data: bytes, source: str) -> pl.DataFrame:
    """A table of ``user`` and its ``items`` (a list, exploded by :mod:`.sequence_rows`)."""
    users, items = [], []
    for lineno, line in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
        fields = line.split()
        if not fields:
            continue
        if not all(f.isdigit() for f in fields):
            raise DataError(
                f"{source}: line {lineno} is not whole numbers split by spaces like the "
                f"lines before it (one user a line, then its items): {line[:80]!r}"
            )
        users.append(int(fields[0]))
        items.append([int(f) for f in fields[1:]])
    return pl.DataFrame(
        {"user": users, "items": items}, schema={"user": pl.Int64, "items": pl.List(pl.Int64)}
    )


SEP_NAMES = {"\t": "tab", ";": "semicolon", "|": "pipe", ",": "comma", " ": "space"}


def sniff_separator(data: bytes, default: str) -> str:
    """``default`` (the extension's separator), unless the header is one field at it and the
    first lines all split into the same number (> 1) of fields at another common separator:
    Excel in many European locales saves "CSV" with ``;``. Space is guessed only where every
    first line is the same number of whole numbers split by single spaces (SASRec's
    ``user item`` files), never elsewhere (a datetime holds one); another file it separates
    gets a hint instead (see :func:`separator_hint`)."""
    lines = [ln.decode("utf-8", "replace") for ln in _io.head_lines(data, 20)]
    lines = [ln.rstrip("\r") for ln in lines if ln.strip()]
    if not lines or len(lines[0].split(default)) > 1:
        return default
    for other in (";", "\t", "|", ","):
        counts = {len(ln.split(other)) for ln in lines}
        if other != default and len(counts) == 1 and counts.pop() > 1:
            return other
    if len({len(ln.split(" ")) for ln in lines}) == 1 and all(
        _WHOLE_NUMBERS.fullmatch(ln.encode()) for ln in lines
    ):
        return " "
    return default


_DATA_CHARS = set("0123456789.-:+/ TZ")


def _is_text_date(value: str) -> bool:
    """A date or datetime written as text (``YYYY-MM-DD``, ``YYYY-MM-DDThh:mm:ss.fffZ``,
    ``D/M/YYYY``), not a number."""
    try:
        float(value)
        return False
    except ValueError:
        return bool(
            re.match(r"\d{4}-\d{2}-\d{2}", value) or re.match(r"\d{1,2}/\d{1,2}/\d{4}", value)
        )


def _looks_like_time(value: str) -> bool:
    """A Unix time (seconds or milliseconds after 1973) or a date / datetime."""
    try:
        return float(value) >= 1e8
    except ValueError:
        return any(c.isdigit() for c in value) and any(c in value for c in "-:/")


def headerless_names(first: list[str]) -> list[str] | None:
    """Column names for a file whose first line is data, not names: every field a number or a
    date (no letters), 2-4 fields, and one of the last two a time when there are 3 or 4. The
    layouts are MovieLens' (``u.data``, ``ratings.dat``: user, item, rating, time), the
    common user, item[, time], and YOOCHOOSE's session, ISO time, item[, category] (a text date
    second); anything else stays an error with the ``names`` hint."""
    fields = [f.strip().strip('"') for f in first]
    if not 2 <= len(fields) <= 4 or not all(
        f and set(f) <= _DATA_CHARS and any(c.isdigit() for c in f) for f in fields
    ):
        return None
    if len(fields) == 2:
        return ["user", "item"]
    dates = [i for i, f in enumerate(fields) if _is_text_date(f)]
    if dates == [1]:  # YOOCHOOSE's clicks.dat: session, ISO time, item[, category]
        return ["user", "timestamp", "item", "category"][: len(fields)]
    if len(fields) == 3:
        return ["user", "item", "timestamp"] if _looks_like_time(fields[2]) else None
    if _looks_like_time(fields[3]):
        return ["user", "item", "rating", "timestamp"]
    if _looks_like_time(fields[2]):
        return ["user", "item", "timestamp", "rating"]
    return None


RECBOLE_TYPES = (b"token", b"token_seq", b"float", b"float_seq")


def strip_header(data: bytes, sep: str) -> tuple[bytes, list[str] | None]:
    """``data`` with the spaces around its header's names removed (`` user_id , item_id``, as
    hand-made or exported files have): a mapping names the columns without them; and, for
    RecBole's atomic files (every name typed: ``user_id:token``, ``genre:token_seq``), without
    the types, returning the ``token_seq`` columns (space-separated lists) as well (None for a
    header without types). The file is copied only when its header changes."""
    first = _io.head_lines(data)[0]
    if len(sep) != 1 or b'"' in first:  # quoted or multi-character: left to the CSV parser
        return data, None
    fields = [f.strip() for f in first.split(sep.encode())]
    typed = all(b":" in f and f.rsplit(b":", 1)[1] in RECBOLE_TYPES for f in fields)
    sequences = (
        [
            f.rsplit(b":", 1)[0].decode("utf-8", "replace")
            for f in fields
            if f.endswith(b":token_seq")
        ]
        if typed
        else None
    )
    if typed:
        fields = [f.rsplit(b":", 1)[0] for f in fields]
    if fields == first.split(sep.encode()):
        return data, sequences
    return sep.encode().join(fields) + data[len(first) :], sequences


def header_names(data: bytes, sep: str, source: str) -> list[str]:
    first = _io.head_lines(data)[0].decode("utf-8", "replace")
    return [c.strip('"') for c in first.split(sep)] if first.strip() else []


def separator_hint(present: list[str], sep: str) -> str:
    """Why a header split into one column: the file uses another separator than its extension's."""
    if len(present) != 1:
        return ""
    for other, cli in ((";", ";"), ("\t", "tab"), ("|", "|"), (",", ","), (" ", "space")):
        if other != sep and len([p for p in present[0].split(other) if p]) > 1:
            return (
                f"the header line {present[0]!r} is one column when split at {sep!r} but "
                f"contains {other!r}: the file looks {cli}-separated; pass sep={other!r} "
                f"(from the CLI: --set data.sep='{cli}')"
                + no_header_hint([p for p in present[0].split(other) if p])
            )
    return ""


def no_header_hint(fields: list[str]) -> str:
    """A first line none of whose fields could name the user or the item is data, not names."""
    words = KEYWORDS["user"] + KEYWORDS["item"]
    aliases = {normalize_name(a) for role in ("user", "item") for a in ALIASES[role]}
    if any(
        normalize_name(f) in aliases or any(w in normalize_name(f) for w in words) for f in fields
    ):
        return ""
    example = (
        ",".join(["user", "item", "timestamp", "rating"][: len(fields)])
        if len(fields) <= 4
        else "a,b,c"
    )
    return (
        f"; its first line does not look like column names: for a file without a header "
        f"line also pass names (--set data.names={example})"
    )
