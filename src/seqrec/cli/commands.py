"""Implementations of the ``seqrec`` subcommands (argument parsing lives in ``main``)."""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import numpy as np

from seqrec.cli.results import (  # noqa: F401 - table_metrics, write_records: used by callers here
    TABLE_METRICS,
    results_header,
    results_table,
    slug,
    table_metrics,
    write_records,
)
from seqrec.cli.table import format_mapping, format_table
from seqrec.config import Experiment, apply_override, experiment_from_tree, load_experiment
from seqrec.errors import ConfigError, DataError


def cmd_demo(args: argparse.Namespace) -> int:
    from seqrec.cli.demo import run

    return run(args)


def dispatch(args: argparse.Namespace) -> int:
    plugin = getattr(args, "plugin_command", None)
    if plugin is not None:  # a command of another package (seqrec.cli.plugins)
        return plugin.run(args)
    handler = {
        "data": cmd_data,
        "models": cmd_models,
        "train": cmd_train,
        "evaluate": cmd_evaluate,
        "recommend": cmd_recommend,
        "export": cmd_export,
        "demo": cmd_demo,
        "serve": cmd_serve,
        "config": cmd_config,
        "tune": cmd_tune,
        "runs": cmd_runs,
        "doctor": cmd_doctor,
        "events": cmd_events,
        "index": cmd_index,
        "update": cmd_update,
    }[args.command]
    return handler(args)


def cmd_update(args: argparse.Namespace) -> int:
    from seqrec.cli.update import cmd_update as run

    return run(args)


def cmd_doctor(args: argparse.Namespace) -> int:
    from seqrec.cli.doctor import cmd_doctor as run

    return run(args)


def cmd_events(args: argparse.Namespace) -> int:
    from seqrec.cli.events import cmd_events as run

    return run(args)


def cmd_index(args: argparse.Namespace) -> int:
    from seqrec.cli.index import cmd_index as run

    return run(args)


def cmd_runs(args: argparse.Namespace) -> int:
    from seqrec.cli.leaderboard import cmd_runs as run

    return run(args)


# --- data -------------------------------------------------------------------------------------
def cmd_data(args: argparse.Namespace) -> int:
    from seqrec.data import sources

    if args.data_command == "list":
        for name in sources.dataset_names():
            print(f"{name:28s} {sources.describe_source(name)}")
        return 0
    if args.data_command == "describe":
        from seqrec.data.preprocess import PreprocessConfig, preprocess
        from seqrec.data.stats import describe

        tree: dict[str, Any] = {"data": {"name": args.name, "root": args.root}}
        for assignment in args.overrides:
            if not assignment.startswith("data."):
                raise ConfigError(f"data describe reads only data.* keys, got --set {assignment}")
            apply_override(tree, assignment)
        section = experiment_from_tree(tree).data
        inter = sources.load(section.name, root=section.root, **section.read_options())
        read = next(
            (
                _columns_read(n)
                for n in inter.notes
                if n.startswith("read ") and n.endswith(")") and "(" in n
            ),
            None,
        )
        unit = next(
            (
                n.removeprefix("timestamps read as ").split(", stored")[0]
                for n in inter.notes
                if n.startswith("timestamps read as ")
            ),
            None,
        )
        if read is not None and unit is not None:
            read += f"; times in {unit}"
        if args.filter != "none":
            cfg = PreprocessConfig(filter=args.filter, min_item=args.k, min_user=args.k)
            inter = preprocess(inter, cfg).interactions
        stats = describe(inter)
        if read is not None:  # shown right after the name, with the lists exploded, the item file
            first, *rest = stats.items()
            also = (
                [("read", "; ".join(_reading_notes(inter.notes)))]
                if _reading_notes(inter.notes)
                else []
            )
            stats = dict([first, ("columns", read), *also, *rest])
        if args.filter == "none":  # what `seqrec train` will keep of it with this data config
            cut = (
                section.filter
                if section.filter == "none"
                else (f"{section.filter} {section.min_user}/{section.min_item}")
            )
            try:
                kept = preprocess(inter, section.preprocess_config()).interactions
                stats["train_keeps"] = (
                    f"{len(np.unique(kept.user)):,} users, {kept.n_items:,} "
                    f"items, {len(kept):,} interactions (filter {cut}; "
                    "data.filter=none keeps all)"
                )
            except DataError:
                stats["train_keeps"] = (
                    f"nothing (filter {cut}): lower data.min_user / "
                    "data.min_item or set data.filter=none"
                )
        print(format_mapping(stats))
        return 0
    if args.data_command == "download":
        return _download(args)
    # prepare
    from seqrec.experiment import prepare_data

    exp = load_experiment(args.config, args.overrides)
    data = prepare_data(exp)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    split = data.split
    np.savez(
        out / "split.npz",
        train_offsets=split.train.offsets,
        train_items=split.train.items,
        valid_rows=split.valid.rows,
        valid_cutoffs=split.valid.cutoffs,
        valid_items=split.valid.items,
        test_rows=split.test.rows,
        test_cutoffs=split.test.cutoffs,
        test_items=split.test.items,
    )
    info = {
        "fingerprint": data.prepared.fingerprint(),
        "n_items": data.prepared.n_items,
        "n_users": data.prepared.n_users,
        "split": split.info,
        "preprocessing": list(data.prepared.interactions.notes),
        "seconds": data.seconds,
    }
    (out / "info.json").write_text(json.dumps(info, indent=2, default=str))
    print(format_mapping({"written": str(out), **{k: v for k, v in info.items() if k != "split"}}))
    return 0


def _download(args: argparse.Namespace) -> int:
    from tqdm.auto import tqdm

    from seqrec.data.sources.download import download

    bars: list = []  # created on the first byte: an unknown name or a cached file shows no bar

    def progress(done: int, total: int | None) -> None:
        if not bars:
            bars.append(tqdm(unit="B", unit_scale=True, desc=args.name))
        bar = bars[0]
        if total and bar.total != total:
            bar.total = total
        bar.update(done - bar.n)

    try:
        path = download(args.name, force=args.force, progress=progress)
    finally:
        for bar in bars:
            bar.close()
    print(f"{args.name}: {path}")
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    from seqrec.registry import SUMMARIES, model_names

    for name in model_names():
        print(f"{name:10s} {SUMMARIES[name]}")
    print(
        "\nseqrec config NAME: a model's settings, each with its default and meaning (the "
        "model's module docstring lists the paper's variants and every deviation)"
    )
    return 0


# --- train / evaluate -------------------------------------------------------------------------
def _model_named(config: str | None, overrides: list[str]) -> bool:
    """Whether the config file or a --set (or -m) names the model (else the default is used)."""
    from seqrec.config import read_config

    if any(o.split("=", 1)[0].strip() == "model.name" for o in overrides):
        return True
    return bool(config) and "name" in (read_config(config).get("model") or {})


def cmd_train(args: argparse.Namespace) -> int:
    import sys

    from seqrec.cli import runs
    from seqrec.evaluation.results import write_result
    from seqrec.experiment import prepare_data, run_experiment

    exp = load_experiment(args.config, args.overrides)
    out = Path(args.out) if args.out else Path(exp.output) / f"{slug(exp.data.name)}-{exp.model}"
    checkpoint = out / runs.CHECKPOINT
    # under torchrun every rank runs this command: rank 0 alone owns the run directory
    rank0 = int(os.environ.get("RANK", "0")) == 0
    if rank0 and not _model_named(args.config, args.overrides):
        print(
            f"note: no model named, so this trains {exp.model!r}, the baseline; pass -m NAME "
            "(seqrec models lists them; -m sasrec is the usual first neural model)",
            file=sys.stderr,
            flush=True,
        )
    resumable = False
    options = {
        "checkpoint_dir": checkpoint,
        "checkpoint_every": runs.CHECKPOINT_EVERY,
        "on_epoch": runs.EpochPrinter(exp.model) if rank0 else None,
        "progress": True,
    }
    try:
        # the data first: a misspelt dataset or an unreadable file leaves no run directory
        data = prepare_data(exp)
        if rank0:
            resumable, _lock = runs.prepare_run_dir(out, exp, args.fresh)  # held until we return
        if rank0 and Path(exp.data.name).exists():  # your own file: say how it was read, first
            for line in data_lines(data):
                print(line, file=sys.stderr, flush=True)
        if rank0:
            runs.check_same_data(
                out,
                exp.data.name,
                data.prepared.fingerprint(),
                data.prepared.n_users,
                data.prepared.n_items,
                resumable,
            )
        if resumable:
            print(
                f"resuming the run in {out} from {checkpoint / 'last.pt'} (--fresh starts over)",
                file=sys.stderr,
                flush=True,
            )
        model, record = run_experiment(
            exp,
            data=data,
            progress=sys.stderr.isatty(),
            save_dir=out / "model",
            fit_options=options,
        )
    except KeyboardInterrupt:
        where = f"checkpoint in {checkpoint}; " if (checkpoint / "last.pt").exists() else ""
        print(
            f"interrupted: {where}rerun the same command to resume, or add --fresh to start over",
            file=sys.stderr,
        )
        return 130
    finally:  # under torchrun: leave the process group (imported only if a model used it)
        dist = sys.modules.get("seqrec.training.distributed")
        if dist is not None:
            dist.shutdown()
    if record is None:  # a torchrun rank other than 0: rank 0 reports
        return 0
    runs.write_train_log(out, model)
    training_log = getattr(model, "training_log", None)
    curve = runs.write_train_curve(
        out,
        training_log.epoch_log if training_log else [],
        f"{exp.model} on {Path(exp.data.name).name}",
    )
    write_result(record, out, "result")
    print(results_header(record))
    print(results_table([record]))
    if record.get("stopped"):
        print(
            f"\ntraining stopped by {runs.STOP_TEXT.get(record['stopped'], record['stopped'])} "
            f"after {record.get('epochs')} epoch(s); per-epoch log: {out / runs.TRAIN_LOG}"
        )
    print(
        f"\nartifact: {out / 'model'}   results: {out}"
        + (f"   training curve: {curve}" if curve else "")
    )
    users = getattr(model, "user_histories", None)  # a real user id, pasteable into a shell
    user = shlex.quote(str(users.raw[0])) if users is not None and len(users) else "USER_ID"
    print(
        f"next: seqrec recommend {out} --user {user}   |   seqrec serve {out}   |   "
        f"seqrec evaluate {out}"
    )
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from seqrec.experiment import evaluate_model, prepare_data
    from seqrec.models.base import Recommender

    model = Recommender.load(args.artifact)
    trained_on = _training_identity(Path(args.artifact))
    if trained_on is not None and not args.config:
        # the run's own data and split, so that `seqrec evaluate RUN/model` needs no config
        tree: dict[str, Any] = {
            "data": dict(trained_on["data"]),
            "split": dict(trained_on["split"]),
            "seed": trained_on["seed"],
        }
        try:
            experiment_from_tree(tree)
        except ConfigError as exc:  # a run recorded by another seqrec version: its keys differ
            raise ConfigError(
                f"cannot rebuild the data and split of the run that saved "
                f"{args.artifact} ({exc}); pass them with --config"
            ) from None
        for assignment in args.overrides or []:
            apply_override(tree, assignment)
        exp = experiment_from_tree(tree)
    else:
        exp = load_experiment(args.config, args.overrides)
    same = _same_data_and_split(trained_on, exp)
    if same is False:
        print(
            "note: this is not the data and split the model was trained on "
            f"({_data_split_text(trained_on['data'], trained_on['split'])}): its training "
            "interactions may be among these targets, so the numbers are not a held-out "
            "estimate",
            file=sys.stderr,
        )
    data = prepare_data(exp)
    if data.prepared.n_items != model.n_items:
        raise DataError(
            f"the artifact knows {model.n_items} items but the configured data has "
            f"{data.prepared.n_items}: evaluate with the data config it was trained on"
            + (
                ""
                if trained_on is None
                else f" ({_data_split_text(trained_on['data'], trained_on['split'])}; leave out "
                "--config and the data/split keys to use it)"
            )
        )
    rows = []
    for name, targets in (("valid", data.split.valid), ("test", data.split.test)):
        res = evaluate_model(model, exp, targets, progress=sys.stderr.isatty())  # no bar in logs
        rows.append([name] + [res.metrics.get(m) for m in table_metrics(exp.eval.ks)])
    print(
        f"{model.name} on {exp.data.name}, {data.split.protocol}, full ranking, "
        f"seen filter {exp.eval.seen_filter}"
        + {
            True: " (the data and split it was trained on)",
            False: " (NOT the training split)",
            None: "",
        }[same]
    )
    print(format_table(["split", *table_metrics(exp.eval.ks)], rows))
    if getattr(args, "index", False):
        _print_index_accuracy(model, exp, data.split.test)
    return 0


def _print_index_accuracy(model: Any, exp: Any, targets: Any) -> None:
    from seqrec.evaluation.index import index_accuracy

    window = getattr(model.config, "max_len", None)
    res = index_accuracy(
        model,
        targets,
        10,
        exp.eval.seen_filter,
        window if exp.eval.seen_filter == "window" else None,
    )
    print(
        f"\ntest targets through the item index against exact ranking ({res['targets']} "
        f"targets, top-10 lists): recall@10 of the exact top-10 {res['recall@10']:.4f}"
        + (
            f"; {res['exact_fallback_rows']} rows ranked exactly (filters)"
            if res["exact_fallback_rows"]
            else ""
        )
    )
    rows = []
    for name in ("exact", "index"):
        r = res[name]
        rows.append([name, r["NDCG@10"], r["HR@10"], round(r["cpu_seconds"], 2)])
    rel = (res["index"]["NDCG@10"] - res["exact"]["NDCG@10"]) / max(res["exact"]["NDCG@10"], 1e-12)
    print(format_table(["ranking", "NDCG@10", "HR@10", "CPU s"], rows))
    print(f"NDCG@10 change with the index: {100 * rel:+.2f}% (relative)")


def _training_identity(artifact: Path) -> dict[str, Any] | None:
    """The data/split/seed identity of the ``seqrec train`` run that saved ``artifact`` (its
    run directory's experiment.json), or None for an artifact saved elsewhere."""
    from seqrec.cli.runs import EXPERIMENT

    try:
        identity = json.loads((artifact.resolve().parent / EXPERIMENT).read_text())["identity"]
        return identity if {"data", "split", "seed"} <= set(identity) else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _same_data_and_split(trained_on: dict[str, Any] | None, exp: Experiment) -> bool | None:
    if trained_on is None:
        return None
    from seqrec.identity import experiment_identity

    ours = experiment_identity(exp)  # the same normalisation as the recorded identity
    return ours["data"] == trained_on["data"] and ours["split"] == trained_on["split"]


def _data_split_text(data: dict[str, Any], split: dict[str, Any]) -> str:
    protocol = split.get("protocol", "?")
    windows = "" if protocol == "leave-last-out" else f" {split.get('valid')}/{split.get('test')}"
    return f"{data.get('name')}, filter {data.get('filter')}, {protocol}{windows}"


def cmd_recommend(args: argparse.Namespace) -> int:
    from seqrec.cli.recommend import cmd_recommend as run

    return run(args)


def cmd_export(args: argparse.Namespace) -> int:
    from seqrec.cli.recommend import cmd_export as run

    return run(args)


def cmd_config(args: argparse.Namespace) -> int:
    from seqrec.config_dump import default_config_toml

    print(default_config_toml(args.model), end="")
    return 0


def cmd_tune(args: argparse.Namespace) -> int:
    import optuna

    from seqrec.tuning import default_space, space_toml, tune, write_best

    if not args.verbose:  # one line per trial from optuna otherwise
        optuna.logging.set_verbosity(optuna.logging.WARNING)
    exp = load_experiment(args.config, args.overrides)
    if not args.config and not any(o.startswith("model.name=") for o in args.overrides):
        raise ConfigError(
            "name the model to tune: seqrec tune DATA -m sasrec (or a config "
            "whose [model] names it); seqrec models lists them"
        )
    study = args.study or (
        Path(args.config).stem if args.config else f"{slug(exp.data.name)}-{exp.model}"
    )
    storage = args.storage or f"sqlite:///{Path(exp.output) / 'tune.db'}"
    out = Path(args.out) if args.out else Path(exp.output) / f"tune-{study}" / "best.toml"
    space = args.space
    if space is None:
        space = default_space(exp.model)
        out.parent.mkdir(parents=True, exist_ok=True)
        (out.parent / "space.toml").write_text(space_toml(space))
        print(
            f"search space: {exp.model}'s built-in one ({', '.join(space)}), written to "
            f"{out.parent / 'space.toml'} (edit it and pass --space to change it)",
            flush=True,
        )
    result = tune(
        args.config,
        args.overrides,
        space,
        args.trials,
        storage,
        study,
        metric=args.metric,
        seed=args.seed,
    )
    write_best(result, args.config, args.overrides, out)
    rows = [
        [t.number, t.state.name, t.value, *(t.params.get(k) for k in sorted(result.best_params))]
        for t in result.trials
    ]
    print(format_table(["trial", "state", args.metric, *sorted(result.best_params)], rows))
    print(
        f"\nstudy {study!r} in {storage}: best trial {result.best_trial.number} "
        f"({args.metric} {result.best_value:.4f}); best config: {out}"
    )
    return 0


def data_lines(data: Any) -> list[str]:
    """What ``seqrec train`` says about a user's file before training: how it was read (the
    columns, named or guessed, and any guess of its layout), what was skipped, and what
    preprocessing and the split kept."""
    inter, prepared = data.prepared.interactions, data.prepared
    read = [n for n in inter.notes if n.startswith("read ")]
    said = [n for n in inter.notes if n.startswith("timestamps read as")]  # skipped rows: warned
    said += _reading_notes(inter.notes)
    lines = [f"data: {read[0]}" if read else "data:"]
    lines += [f"  {n}" for n in said]
    kept = next((n for n in inter.notes if n.startswith("kept ")), None)  # "kept X of Y ..."
    lines.append(
        f"  preprocessing {kept}"
        if kept
        else f"  kept {prepared.n_users:,} users, {prepared.n_items:,} items, {len(inter):,} "
        f"interactions after preprocessing"
    )
    return lines


def _reading_notes(notes: tuple[str, ...] | list[str]) -> list[str]:
    """The notes of a reader that change what a file means beyond its columns: a table of lists
    exploded into interactions, an item file attached, columns it did not use."""
    return [
        n
        for n in notes
        if n.startswith(
            (
                "one row per user with lists",
                "item metadata from",
                "ignored column",
                "kept the rows whose",
            )
        )
    ]


def _columns_read(note: str) -> str:
    """The "columns" line of ``data describe`` from a reader's note, ``read shop.csv
    [semicolon-separated] (user=customer, item=sku, ...)`` or ``read 2 part files of export/
    (a.csv .. b.csv) (user=...)``: the columns a file was read with, named or guessed, then what
    was guessed of its layout, then the parts read."""
    line = note[note.rindex("(") + 1 : -1] + "".join(
        f"; {g}" for g in re.findall(r"\[([^\]]+)\]", note)
    )
    return line + ("; " + note.split(" (")[0] if " part files " in note else "")


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from seqrec.serving.service import create_app

    sock = _listen(args.host, args.port)  # bound before the banner, so --port 0 shows its port
    key = getattr(args, "api_key", None) or os.environ.get("SEQREC_API_KEY") or None
    try:
        app = create_app(  # a damaged artifact (or an unreachable event store) fails here
            args.artifact,
            getattr(args, "cors", None),
            key,
            getattr(args, "events", None),
            getattr(args, "state_cache", 10_000),
            exact=getattr(args, "exact", False),
        )
    except BaseException:
        sock.close()
        raise
    port = sock.getsockname()[1]
    shown = "localhost" if args.host in ("0.0.0.0", "::", "127.0.0.1") else args.host
    url = f"http://{shown}:{port}"
    auth = ' -H "Authorization: Bearer $KEY"' if key else ""
    print(
        f"serving {args.artifact} on {url} (API docs: {url}/docs){'; API key required' if key else ''}"
        f"{'; events in ' + app.state.events if app.state.events else ''}; "
        f"try:\n  curl{auth} '{url}/recommend?{app.state.example_query}'",
        file=sys.stderr,
        flush=True,
    )
    if not key and args.host not in ("127.0.0.1", "localhost", "::1"):
        print(
            f"note: listening on {args.host} without --api-key: anyone who can reach this port "
            "can query the model",
            file=sys.stderr,
            flush=True,
        )
    server = uvicorn.Server(uvicorn.Config(app, host=args.host, port=port))
    server.run(sockets=[sock])
    return 0


def _listen(host: str, port: int) -> Any:
    """The bound listening socket, or a one-line error for a port out of range or an address
    that cannot be bound (uvicorn would print a traceback or a log block). Port 0 takes a free
    port, which the socket then knows."""
    import socket

    if not 0 <= port <= 65535:
        raise ConfigError(f"--port must be in 0..65535, got {port}")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise ConfigError(f"--host {host!r} cannot be resolved: {exc}") from None
    family, kind, proto, _, addr = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock
