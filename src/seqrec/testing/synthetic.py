"""Tiny synthetic datasets for fast tests: learnable next-item structure in a few dozen users."""

from __future__ import annotations

import numpy as np

from seqrec.data.attributes import ItemAttributes
from seqrec.data.sequences import Sequences, Targets
from seqrec.data.vocab import ItemVocab


def markov_sequences(
    n_users: int = 64,
    n_items: int = 30,
    min_len: int = 5,
    max_len: int = 20,
    noise: float = 0.1,
    seed: int = 0,
) -> Sequences:
    """Sequences following ``next = cur % n_items + 1`` (with prob. ``1 - noise``), random
    otherwise; every user has a vocabulary of raw ids ``"i1".."iN"``, whose item attributes
    give item ``i`` the category ``(i - 1) % 4 + 1`` (for models that read categories)."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n_users):
        length = int(rng.integers(min_len, max_len + 1))
        cur = int(rng.integers(1, n_items + 1))
        row = [cur]
        for _ in range(length - 1):
            cur = cur % n_items + 1 if rng.random() > noise else int(rng.integers(1, n_items + 1))
            row.append(cur)
        rows.append(row)
    ids = np.arange(1, n_items + 1, dtype=np.int64)
    attributes = ItemAttributes(
        ids, (ids - 1) % 4 + 1, np.full(n_items, "category"), np.zeros(n_items, np.int64)
    )
    vocab = ItemVocab(np.array([f"i{i}" for i in ids], dtype=object), attributes=attributes)
    times = [list(range(len(r))) for r in rows]
    return Sequences.from_lists(
        rows, n_items=n_items, timestamps=times, users=np.arange(n_users), vocab=vocab
    )


def leave_last_out_small(seqs: Sequences) -> tuple[Sequences, Targets, Targets]:
    """(train, valid, test) by leave-last-out, self-contained for tests: valid target = second
    last item (history before it), test target = last item (history includes the valid item).
    Rows need >= 3 items."""
    lengths = seqs.lengths
    if lengths.min() < 3:
        raise ValueError("every row needs >= 3 items")
    rows = np.arange(len(seqs))
    train = seqs.slice_rows(rows, np.zeros(len(seqs), np.int64), lengths - 2)
    ends = seqs.offsets[1:]
    valid = Targets(seqs, rows, lengths - 2, seqs.items[ends - 2])
    test = Targets(seqs, rows, lengths - 1, seqs.items[ends - 1])
    return train, valid, test


def write_log_csv(
    path,
    n_users: int = 40,
    n_items: int = 30,
    seed: int = 0,
    columns: tuple[str, str, str] = ("customer", "sku", "event_ms"),
    time_unit: str = "ms",
    sep: str = ",",
    rare_items: int = 2,
) -> dict:
    """Write a Markov interaction log as a delimited file with custom column names, for tests
    of the own-data path. Item ids are text (``sku7``), user ids text (``c3``), times start at
    the first second of 2021 (UTC) in ``time_unit`` ('s', 'ms' or 'iso'); ``rare_items`` extra items occur once
    each (a 5-core filter removes them). Rows are shuffled (the reader must sort by time).

    Returns ``{"users": [...], "items": [...], "rare": [...], "rows": n}``.
    """
    from pathlib import Path

    seqs = markov_sequences(n_users=n_users, n_items=n_items, min_len=6, max_len=15, seed=seed)
    rng = np.random.default_rng(seed)
    base = 1_609_459_200  # midnight, 1 January 2021, UTC
    rows = []
    for u in range(len(seqs)):
        items = seqs.items[seqs.offsets[u] : seqs.offsets[u + 1]]
        for t, item in enumerate(items):
            rows.append((f"c{u}", f"sku{item}", base + 3600 * u + 60 * t))
    rare = [f"rare{j}" for j in range(rare_items)]
    for j, name in enumerate(rare):
        rows.append((f"c{j}", name, base + 3600 * j + 30))
    order = rng.permutation(len(rows))
    user_col, item_col, time_col = columns
    lines = [sep.join(columns)]
    for i in order:
        user, item, sec = rows[i]
        if time_unit == "ms":
            stamp = str(sec * 1000 + int(rng.integers(0, 1000)))
        elif time_unit == "iso":
            stamp = np.datetime64(sec, "s").astype(str).replace("T", " ")
        else:
            stamp = str(sec)
        lines.append(sep.join((user, item, stamp)))
    Path(path).write_text("\n".join(lines) + "\n")
    return {
        "users": [f"c{u}" for u in range(len(seqs))],
        "items": [f"sku{i}" for i in range(1, n_items + 1)],
        "rare": rare,
        "rows": len(rows),
    }


def write_csv(seqs: Sequences, path) -> None:
    """``seqs`` as a ``user,item,timestamp`` CSV (raw ids = internal ids), for CLI tests."""
    lines = ["user,item,timestamp"]
    for u in range(len(seqs)):
        lo, hi = int(seqs.offsets[u]), int(seqs.offsets[u + 1])
        lines += [f"{u},{int(i)},{t}" for t, i in enumerate(seqs.items[lo:hi])]
    with open(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")
