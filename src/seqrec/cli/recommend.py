"""``seqrec recommend`` (one history, one known user, or a batch file) and ``seqrec export``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from seqrec.cli.table import format_table
from seqrec.errors import ConfigError


def add_recommend_args(r: argparse.ArgumentParser) -> None:
    r.add_argument(
        "artifact",
        help="a saved model: the run directory seqrec train printed (runs/shop-sasrec) or its model/ folder",
    )
    r.add_argument("history", nargs="*", help="raw item ids, oldest first (or --history)")
    r.add_argument("--history", dest="history_csv", help="comma-separated raw item ids")
    r.add_argument(
        "--times",
        help="the history's times, comma-separated (Unix seconds or ISO dates, "
        "one per item): a model trained with time needs them",
    )
    r.add_argument(
        "--user",
        action="append",
        help="a known user id: recommend from their stored history (repeatable, or a "
        "comma list: one table each)",
    )
    r.add_argument("--input", help="batch: .csv/.tsv/.parquet/.xlsx of user ids or histories")
    r.add_argument(
        "--output",
        help="batch: where the top-k lists go (.csv/.tsv/.parquet; default: CSV on standard output)",
    )
    r.add_argument(
        "--events",
        help="offline replay: a file of events (user, item[, timestamp] columns, as a log) "
        "appended to the users' stored histories first, through the live path; answers "
        "--user / --input users, else every user of the file",
    )
    r.add_argument(
        "--unknown-users",
        choices=["error", "empty"],
        default="error",
        help="a user id with no stored history (and no events): error (default, naming it) or "
        "empty (the popularity ranking, marked as the fallback); the same rule as the HTTP "
        "service's unknown_users",
    )
    r.add_argument("--allow", help="only these item ids: a comma list or a file (one per line)")
    r.add_argument("--deny", help="never these item ids: a comma list or a file")
    r.add_argument("-k", type=int, default=10, help="how many items to recommend (default 10)")
    r.add_argument("--include-seen", action="store_true", help="do not exclude history items")
    r.add_argument(
        "--exact", action="store_true", help="rank every item even if the artifact has an index"
    )


def add_export_args(x: argparse.ArgumentParser) -> None:
    x.add_argument(
        "artifact",
        help="a saved model: the run directory seqrec train printed (runs/shop-sasrec) or its model/ folder",
    )
    x.add_argument("--format", default="onnx", choices=["onnx", "torchscript"])
    x.add_argument(
        "--out",
        help="file to write (default: beside the artifact, in its run "
        "directory: MODEL.onnx, or MODEL.pt for torchscript)",
    )
    x.add_argument(
        "--no-check",
        action="store_true",
        help="skip the parity check of the exported scores against PyTorch",
    )


def cmd_recommend(args: argparse.Namespace) -> int:
    from seqrec.models.base import Recommender
    from seqrec.serving import batch

    history = list(args.history)
    if args.history_csv:
        history += [h for h in args.history_csv.split(",") if h.strip()]
    users = [u for given in (args.user or []) for u in given.split(",") if u.strip()]
    modes = [bool(history), bool(users), args.input is not None]
    if sum(modes) > 1:
        raise ConfigError("give one of: a history, --user ID, or --input FILE")
    if args.output and not (args.input or getattr(args, "events", None)):
        raise ConfigError("--output goes with --input FILE (a batch of users or histories)")
    allow = batch.read_id_list(args.allow) if args.allow else None
    deny = batch.read_id_list(args.deny) if args.deny else None
    unknown_users = getattr(args, "unknown_users", "error")
    model = Recommender.load(args.artifact)
    if getattr(args, "exact", False):
        model.index = None
    if getattr(args, "events", None):
        if history:
            raise ConfigError(
                "--events replays users' events: give --user / --input, not a history"
            )
        return _replay(model, args, users, allow, deny, unknown_users)
    if args.input:
        requests = batch.read_requests(args.input)
        # --unknown-users empty: a new user gets the fallback ranking, and a note names them
        recs = batch.recommend_requests(
            model,
            requests,
            args.k,
            not args.include_seen,
            allow,
            deny,
            unknown_users=unknown_users,
        )
        # without --output the table is CSV on stdout: notes go to stderr, so a pipe gets data only
        notes_to = sys.stdout if args.output else sys.stderr
        for note in (
            batch.unknown_user_summary(model, requests),
            batch.skipped_summary(model, recs),
            batch.ranking_summary(model, recs),
        ):
            if note:
                print(f"note: {note}", file=notes_to)
        table = batch.to_frame(model, requests, recs)
        if not args.output:
            sys.stdout.write(table.write_csv())
            return 0
        batch.write_table(table, args.output)
        print(
            f"wrote {table.height} rows ({len(requests)} requests, top-{args.k}) to {args.output}"
        )
        return 0
    times = (
        [t.strip() for t in args.times.split(",") if t.strip()]
        if getattr(args, "times", None)
        else None
    )
    if times is not None and not history:
        raise ConfigError("--times goes with a history (a stored user's times are stored)")
    requests = [batch.Request(u) for u in users] or [batch.Request("-", history, times)]
    recs = batch.recommend_requests(
        model, requests, args.k, not args.include_seen, allow, deny, unknown_users=unknown_users
    )
    for i, (request, rec) in enumerate(zip(requests, recs, strict=True)):
        if i:
            print()
        _print_one(model, request, rec, bool(users))
    return 0


def _replay(model, args, users, allow, deny, unknown_users: str) -> int:
    """``--events FILE``: the events appended (in an in-memory store) through the live path,
    then the answers of --user users (tables), --input users or every user of the file (CSV)."""
    from seqrec.live.session import Live
    from seqrec.live.store import make_event
    from seqrec.serving import batch

    df = batch._canonical(batch._read_table(Path(args.events)), str(args.events))
    if "user" not in df.columns or "item" not in df.columns:
        raise ConfigError(
            f"{args.events}: events need 'user' and 'item' columns (and 'timestamp'); "
            f"columns present: {', '.join(df.columns)}"
        )
    has_time = "timestamp" in df.columns
    if not has_time and getattr(model, "reads_time", False):
        raise ConfigError(f"{model.name} reads time: {args.events} needs a 'timestamp' column")
    live = Live(model, ":memory:", capacity=max(1, df["user"].n_unique()))
    # file order is event order; without timestamps each event gets its row number
    evs = [
        make_event(u, i, t if has_time else None, now=n)
        for n, (u, i, t) in enumerate(
            zip(
                df["user"].to_list(),
                df["item"].to_list(),
                df["timestamp"].to_list() if has_time else [None] * df.height,
                strict=True,
            )
        )
    ]
    got = live.append(evs)
    if got["unknown_items"]:
        print(
            f"note: {len(got['unknown_items'])} event item id(s) the model does not know were "
            f"skipped: {batch.describe_skipped(model.vocab, got['unknown_items'])}",
            file=sys.stderr,
        )
    if args.input:
        requests = batch.read_requests(args.input)
        if any(r.history is not None for r in requests):
            raise ConfigError("--events with --input takes a file of user ids (a 'user' column)")
        wanted = [str(r.key) for r in requests]
    else:
        wanted = users or list(dict.fromkeys(str(u) for u in df["user"].to_list()))
    recs = live.recommend(wanted, args.k, not args.include_seen, allow, deny, unknown_users)
    requests = [batch.Request(u) for u in wanted]
    print(f"replayed {len(evs)} events of {args.events}", file=sys.stderr)
    if users:
        for i, (request, rec) in enumerate(zip(requests, recs, strict=True)):
            if i:
                print()
            print(f"user {request.key}: {len(live.history(request.key))} items with the events")
            _print_one(model, request, rec, False)
        return 0
    table = batch.to_frame(model, requests, recs)
    if not args.output:
        sys.stdout.write(table.write_csv())
        return 0
    batch.write_table(table, args.output)
    print(f"wrote {table.height} rows ({len(requests)} users, top-{args.k}) to {args.output}")
    return 0


def _print_one(model, request, rec, stored: bool) -> None:
    """One answer as the terminal shows it: the user line, notes, then the ranked items."""
    from seqrec.serving import batch

    if stored:
        n = len(batch.histories_of(model, [request], "empty")[0])  # unknown: 0 (--unknown-users)
        print(f"user {request.key}: {n} stored items")
    if rec.skipped_ids:
        print(
            f"note: skipped {len(rec.skipped_ids)} unknown item id(s): "
            f"{batch.describe_skipped(model.vocab, rec.skipped_ids)}"
        )
        users = getattr(model, "user_histories", None)
        known = [u for u in rec.skipped_ids if users is not None and u in users]
        if known:  # `seqrec recommend RUN u1`: a user id typed where item ids go
            print(
                f"note: {known[0]!r} is a user id: for that user's stored history pass "
                f"--user {known[0]}"
            )
    if rec.fallback:
        print(f"note: empty history, showing the {rec.fallback} ranking")
    elif getattr(model, "index", None) is not None:
        print(
            "note: ranked with the artifact's item index (approximate; --exact ranks every item)"
            if rec.ranking == "index"
            else "note: ranked exactly: after the filters the item index had too few candidates"
        )
    rows = []
    cats = getattr(model.vocab, "categories", None) is not None
    for rank, (item, score) in enumerate(zip(rec.items, rec.scores, strict=False), 1):
        internal = int(model.vocab.encode([item])[0])
        row = [
            rank,
            str(item),
            score,
            model.vocab.title(internal) or "",
        ]  # ids exactly as read: 34686, not 34,686
        rows.append(row + ([model.vocab.category(internal) or ""] if cats else []))
    headers = ["rank", "item", "score", "title"] + (["categories"] if cats else [])
    # a log without an item file has no titles: no empty column
    keep = [
        i
        for i, h in enumerate(headers)
        if h not in ("title", "categories") or any(r[i] for r in rows)
    ]
    print(format_table([headers[i] for i in keep], [[r[i] for i in keep] for r in rows]))


def cmd_export(args: argparse.Namespace) -> int:
    from seqrec.data.sequences import Sequences
    from seqrec.models.base import Recommender
    from seqrec.serving.export import export_model, item_map_path, parity

    model = Recommender.load(args.artifact)
    target = args.out or Path(args.artifact).resolve().parent / (
        f"{model.name}.{'onnx' if args.format == 'onnx' else 'pt'}"
    )
    out = export_model(model, target, args.format)
    print(
        f"wrote {args.format} graph of {model.name} to {out} "
        f"({out.stat().st_size / 1e6:.1f} MB; inputs: items [B, {model.config.max_len}])"
    )
    print(f"wrote its item map to {item_map_path(out)} (score column / input id -> raw item id)")
    if args.no_check:
        return 0
    users = getattr(model, "user_histories", None)
    if users is None or len(users) == 0:
        print("parity check skipped: the artifact stores no user histories")
        return 0
    n = min(len(users), 64)
    rows = [users.items[users.offsets[i] : users.offsets[i + 1]] for i in range(n)]
    # users.npz keeps no times: a model that reads them is checked on evenly spaced ones
    seqs = Sequences.from_lists(
        [r.astype("int64") for r in rows],
        n_items=model.n_items,
        timestamps=[[60 * t for t in range(len(r))] for r in rows],
    )
    diff = parity(model, out, seqs, args.format)
    print(f"parity on {n} stored histories: max |score difference| = {diff:.3g}")
    return 0
