"""``seqrec update RUN NEW_LOG``: continue a trained run on new interactions and save the result
as the artifact's next version, the previous one kept beside it (``model.v1/``)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from seqrec.errors import ConfigError


def add_update_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "artifact",
        metavar="RUN",
        help="the run directory seqrec train printed (runs/shop-sasrec) or its model/ folder",
    )
    p.add_argument(
        "new_log",
        metavar="NEW_LOG",
        help="the new interactions (a file read with the run's data settings: columns, "
        "separator, time unit, event kinds)",
    )
    p.add_argument(
        "--epochs",
        type=int,
        default=5,
        help="epochs over the update data (default 5; neural models)",
    )
    p.add_argument("--lr", type=float, default=None, help="learning rate (default: the run's)")
    p.add_argument(
        "--item-file",
        default=None,
        metavar="FILE",
        help="item metadata for the new items (id, title, categories, vector; default: the "
        "run's data.item_file): their titles, categories and vectors come along, categories "
        "matched by name to the ones the model trained with",
    )
    p.add_argument(
        "--item-columns",
        default=None,
        metavar="MAPPING",
        help="column mapping of --item-file 'item=sku,title=name,categories=tags,vector=emb' "
        "(default: the run's data.item_columns, else common names)",
    )
    p.add_argument(
        "--replay",
        default="all",
        help="which users without new events are trained on again: 'all' (default), 'none', "
        "or a share of them such as 0.2",
    )


def cmd_update(args: argparse.Namespace) -> int:
    from seqrec.config import DataSection
    from seqrec.serving.artifact import artifact_dir
    from seqrec.update import parse_replay

    art = artifact_dir(args.artifact)
    replay = parse_replay(args.replay)
    data = _run_data(art)
    where = "the run's data settings" if data is not None else "default data settings"
    if data is None:
        print(
            f"note: {art} is not in a seqrec train run directory: {args.new_log} is read "
            "with the default settings (columns recognised by name)",
            file=sys.stderr,
        )
        data = DataSection()
    if args.item_file or args.item_columns:
        data = dataclasses.replace(
            data,
            item_file=args.item_file or data.item_file,
            item_columns=args.item_columns or data.item_columns,
        )
    lock = None
    if _run_data(art) is not None:  # one writer per run: not beside a training or an update
        from seqrec.cli.runs import LOCK
        from seqrec.locks import lock_dir

        lock = lock_dir(
            art.resolve().parent, LOCK, f"{art.parent} is in use by another seqrec train or update"
        )
    try:
        return _update(args, art, data, where, replay)
    finally:
        if lock is not None:
            lock.close()


def _update(args: argparse.Namespace, art: Path, data: Any, where: str, replay: Any) -> int:
    from seqrec import stop
    from seqrec.serving.artifact import load_recommender
    from seqrec.serving.versions import save_new_version
    from seqrec.update import read_new_log, update_model

    model = load_recommender(art)
    new = read_new_log(args.new_log, data.read_options())
    read = [n for n in new.notes if n.startswith("read ")]
    print(f"new log: {read[0] if read else args.new_log} ({where})", file=sys.stderr)
    for note in (n for n in new.notes if not n.startswith("read ")):  # all the reader said
        print(f"  {note}", file=sys.stderr)
    neural = hasattr(model, "train_config")
    fit_options: dict[str, Any] = {}
    if neural:
        fit_options = {"epochs": args.epochs, "lr": args.lr, "progress": sys.stderr.isatty()}
    else:
        print(
            f"{model.name} is refit on the update data (a closed-form fit: --epochs and --lr "
            "do not apply)",
            file=sys.stderr,
        )
    try:
        with stop.on_signals():
            report = update_model(
                model,
                new,
                replay=replay,
                min_rating=data.min_rating,
                dedup=data.dedup,
                seed=getattr(getattr(model, "train_config", None), "seed", 0),
                fit_options=fit_options,
            )
    except stop.Interrupted as exc:
        print(f"interrupted: {exc}; {art} is unchanged", file=sys.stderr)
        return 130
    for line in report.lines():
        print(line, file=sys.stderr)
    if getattr(model, "index", None) is not None:
        print(
            f"item index rebuilt over the new weights ({model.index.n_items:,} items, "
            f"{model.index.build_seconds or 0:.1f} s)",
            file=sys.stderr,
        )
    version, kept = save_new_version(model, art)
    print(f"wrote {art} (version {version}); version {version - 1} kept in {kept}")
    return 0


def _run_data(art: Path) -> Any:
    """The data section of the ``seqrec train`` run holding ``art`` (None: not in a run)."""
    from seqrec.cli.runs import EXPERIMENT
    from seqrec.config import DataSection

    path = art.resolve().parent / EXPERIMENT
    if not path.is_file():
        return None
    try:
        section = json.loads(path.read_text())["identity"]["data"]
        return DataSection(**section)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: cannot read the run's data settings ({exc})") from None
