"""``seqrec events export``: the live service's event log as a training file."""

from __future__ import annotations

import argparse
from pathlib import Path

from seqrec.errors import ConfigError

OUT_EXT = (".csv", ".tsv", ".parquet", ".pq")


def add_events_args(ev: argparse.ArgumentParser) -> None:
    esub = ev.add_subparsers(dest="events_command", required=True)
    x = esub.add_parser(
        "export",
        help="write the event log as a training file (user, item, timestamp) that seqrec train reads",
    )
    x.add_argument(
        "store", help="the event store: the SQLite file or redis:// URL of serve --events"
    )
    x.add_argument("--output", required=True, help="file to write: .csv, .tsv or .parquet")
    x.add_argument(
        "--artifact",
        help="also write the training histories stored in this artifact (users.npz), before "
        "the events: the whole data a retrain needs",
    )


def cmd_events(args: argparse.Namespace) -> int:
    import polars as pl

    from seqrec.live.store import open_store
    from seqrec.serving.batch import write_table

    out = Path(args.output)
    if out.suffix.lower() not in OUT_EXT:
        raise ConfigError(f"--output must end in {', '.join(OUT_EXT)}, got {out.name}")
    users: list[str] = []
    items: list[str] = []
    times: list[int | None] = []
    n_stored = 0
    if args.artifact:
        from seqrec.models.base import Recommender
        from seqrec.serving.artifact import artifact_dir

        model = Recommender.load(artifact_dir(args.artifact))
        hist = getattr(model, "user_histories", None)
        if hist is None:
            raise ConfigError(f"{args.artifact} stores no user histories (users.npz)")
        if hist.times is None:
            raise ConfigError(
                f"{args.artifact} stores no times with its histories: the events could not be "
                "ordered after them; export the events alone and add your original log"
            )
        raw_items = model.vocab.decode(hist.items.astype("int64"))
        for u in range(len(hist)):
            lo, hi = int(hist.offsets[u]), int(hist.offsets[u + 1])
            users += [str(hist.raw[u])] * (hi - lo)
            items += [str(i) for i in raw_items[lo:hi].tolist()]
            times += hist.times[lo:hi].tolist()
        n_stored = len(items)
    store = open_store(args.store)
    try:
        for ev in store.events():
            users.append(ev.user)
            items.append(ev.item)
            times.append(ev.time)
    finally:
        store.close()
    n_events = len(items) - n_stored
    if not items:
        raise ConfigError(f"{args.store} holds no events (and no --artifact was given)")
    table = pl.DataFrame(
        {"user": users, "item": items, "timestamp": times},
        schema={"user": pl.String, "item": pl.String, "timestamp": pl.Int64},
    )
    write_table(table, out)
    where = f" and {n_stored} stored interactions of {args.artifact}" if n_stored else ""
    print(
        f"wrote {n_events} events{where} to {out} (columns user, item, timestamp in Unix "
        f"seconds): seqrec train {out} -m MODEL"
    )
    return 0
