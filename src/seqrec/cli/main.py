"""``seqrec`` command line. The CLI owns the terminal: tables, progress bars, one-line errors."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading

from seqrec import __version__
from seqrec.errors import SeqRecError


def _add_experiment_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", "-c", help="experiment config (.toml / .yaml)")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, e.g. --set model.name=sasrec (repeatable)",
    )


def _add_shortcut_args(p: argparse.ArgumentParser) -> None:
    """``seqrec train shop.csv -m sasrec``: what a newcomer types first, as --set shortcuts."""
    p.add_argument(
        "data_shortcut",
        nargs="?",
        metavar="DATA",
        help="a dataset name (seqrec data list) or your own file / directory: the same "
        "as --set data.name=DATA (a .toml / .yaml file here is read as --config)",
    )
    p.add_argument(
        "--model",
        "-m",
        dest="model_shortcut",
        action="append",
        help="a model name (seqrec models): the same as --set model.name=...",
    )


class _Parser(argparse.ArgumentParser):
    """argparse with a hint for what newcomers type: ``--epochs 3`` (settings go through
    ``--set``) and ``seqrec train shop.csv sasrec`` (the model goes with ``-m``)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        if message.startswith("unrecognized arguments:"):
            message += _unrecognized_hint(message.split(":", 1)[1].split())
        elif "invalid choice: 'reproduce'" in message:
            message += (
                " (seqrec reproduce is the research layer's command, registered by the "
                "entry point group seqrec.commands: reinstall seqrec, e.g. pip install -e "
                "., so that its entry points are installed)"
            )
        super().error(message)


# flags a newcomer guesses that name a section or a synonym rather than a key
_FLAG_KEYS = {
    "data": "data.name",
    "dataset": "data.name",
    "data_path": "data.name",
    "input": "data.name",
    "file": "data.name",
    "path": "data.name",
    "split": "split.protocol",
    "protocol": "split.protocol",
    "k": "eval.ks",
    "topk": "eval.ks",
    "metrics_k": "eval.ks",
    "model_name": "model.name",
}


def _unrecognized_hint(tokens: list[str]) -> str:
    at = next((i for i, t in enumerate(tokens) if t.startswith("--") and len(t) > 2), None)
    if at is not None:
        from seqrec.config import section_of

        key, eq, value = tokens[at][2:].partition("=")
        key = key.replace("-", "_")
        if not eq:
            value = (
                tokens[at + 1]
                if at + 1 < len(tokens) and not tokens[at + 1].startswith("-")
                else "VALUE"
            )
        dotted = _FLAG_KEYS.get(key, f"{section_of(key)}.{key}")
        return (
            f" (settings go through --set: --set {dotted}={value}; seqrec config MODEL lists them)"
        )
    from seqrec.registry import model_names

    model = next((t for t in tokens if t in model_names()), None)
    if model is not None:
        return f" (a model name goes with -m: -m {model})"
    return ""


_DESCRIPTION = (
    "Sequential (next-item) recommendation: train SASRec, LRURec, HSTU, LSAN and more "
    "on a log of interactions, evaluate them under recorded protocols, and serve them."
)
_EXAMPLES = """first steps:
  seqrec demo                                  the models on the shipped MovieLens sample, one table
  seqrec demo shop.csv                         the same on your own log (.csv/.tsv/.parquet/.xlsx/.jsonl)
  seqrec train shop.csv -m sasrec              train one model; Ctrl-C, then the same command resumes
  seqrec recommend runs/shop-sasrec --user 42  top-10 for a user; --input users.csv for a batch
  seqrec serve runs/shop-sasrec                an HTTP service: GET /recommend?user=42
settings go through --set (seqrec config sasrec lists them); each command has --help;
seqrec doctor says what this installation can do (versions, GPU, extras, data folders)"""


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="seqrec",
        description=_DESCRIPTION,
        epilog=_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"seqrec {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    sub = parser.add_subparsers(dest="command", required=True)

    data = sub.add_parser("data", help="list, describe or prepare datasets")
    dsub = data.add_subparsers(dest="data_command", required=True)
    dsub.add_parser("list", help="known dataset names")
    d = dsub.add_parser("describe", help="users, items, interactions, lengths, density")
    d.add_argument("name")
    d.add_argument("--root", help="directory of the dataset files")
    d.add_argument("--filter", default="none", choices=["none", "min_count", "k_core"])
    d.add_argument("--k", type=int, default=5, help="threshold of --filter")
    d.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="data.KEY=VALUE",
        help="how to read your own file, as for train (e.g. data.columns=user=customer,"
        "item=sku,timestamp=ts, data.time_unit=ms, data.sep=tab); repeatable",
    )
    d = dsub.add_parser("download", help="download an original dataset into the cache")
    d.add_argument("name")
    d.add_argument("--force", action="store_true", help="download again even if cached")
    d = dsub.add_parser("prepare", help="preprocess and split, write arrays to a directory")
    _add_experiment_args(d)
    _add_shortcut_args(d)
    d.add_argument("--out", required=True, help="output directory")

    sub.add_parser("models", help="known model names")
    c = sub.add_parser("config", help="print a model's default experiment config as TOML")
    c.add_argument("model", help="a model name (seqrec models)")

    t = sub.add_parser("train", help="fit a model, evaluate it, save the artifact and results")
    _add_experiment_args(t)
    _add_shortcut_args(t)
    t.add_argument("--out", help="run directory (default: <output>/<dataset>-<model>)")
    t.add_argument(
        "--fresh",
        action="store_true",
        help="start over instead of resuming the run in the directory",
    )

    from seqrec.cli.update import add_update_args

    add_update_args(
        sub.add_parser(
            "update",
            help="continue a trained run on new interactions (new users and items too); "
            "the artifact's previous version is kept",
        )
    )

    tu = sub.add_parser(
        "tune", help="hyperparameter search with Optuna (TPE, pruning, shared storage)"
    )
    _add_experiment_args(tu)
    _add_shortcut_args(tu)
    tu.add_argument(
        "--space",
        help="search space TOML (dotted key -> distribution); default: the "
        "model's built-in space (learning rate, dropout, width, depth or ranks), "
        "written beside the best config",
    )
    tu.add_argument("--trials", type=int, default=20, help="trials the study should hold in total")
    tu.add_argument("--storage", help="Optuna database URL (default sqlite:///<output>/tune.db)")
    tu.add_argument("--study", help="study name (default: the config file's stem)")
    tu.add_argument("--metric", default="NDCG@10", help="validation metric to maximise")
    tu.add_argument("--seed", type=int, default=None, help="sampler seed (default: random)")
    tu.add_argument("--out", help="best config TOML (default <output>/tune-<study>/best.toml)")

    rs = sub.add_parser(
        "runs",
        help="the trained runs under a folder in one table, best first "
        "(grouped by data and protocol)",
    )
    rs.add_argument("dirs", nargs="*", metavar="DIR", help="folders of runs (default: runs)")
    rs.add_argument("--metric", default="NDCG@10", help="the metric to rank by (default NDCG@10)")

    e = sub.add_parser("evaluate", help="evaluate a saved artifact on the configured split")
    e.add_argument(
        "artifact",
        help="a saved model: the run directory seqrec train printed (runs/shop-sasrec) or its model/ folder",
    )
    _add_experiment_args(e)
    e.add_argument(
        "--index",
        action="store_true",
        help="also rank the test targets through the artifact's item index: recall of the "
        "exact top-10, NDCG@10 / HR@10 of both",
    )

    from seqrec.cli.index import add_index_args
    from seqrec.cli.recommend import add_export_args, add_recommend_args

    add_index_args(
        sub.add_parser(
            "index", help="build an approximate item index into a saved model (seqrec[ann])"
        )
    )

    add_recommend_args(
        sub.add_parser(
            "recommend", help="top-k for a history, a known user (--user) or a batch file (--input)"
        )
    )
    add_export_args(sub.add_parser("export", help="export a neural model to ONNX / TorchScript"))

    s = sub.add_parser("serve", help="HTTP service over a saved artifact (FastAPI + uvicorn)")
    s.add_argument(
        "artifact",
        help="a saved model: the run directory seqrec train printed (runs/shop-sasrec) or its model/ folder",
    )
    s.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only; 0.0.0.0: every interface)",
    )
    s.add_argument("--port", type=int, default=8000)
    s.add_argument(
        "--exact", action="store_true", help="rank every item even if the artifact has an index"
    )
    s.add_argument(
        "--cors",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="let a web page from ORIGIN (https://shop.example) call the service from a "
        "browser; '*' allows any; repeatable (default: none, same-origin only)",
    )
    s.add_argument(
        "--api-key",
        default=None,
        metavar="KEY",
        help="require 'Authorization: Bearer KEY' (or 'X-API-Key: KEY') on the "
        "endpoints that answer from the model (not /health, /, /docs); default: "
        "$SEQREC_API_KEY, else open",
    )

    s.add_argument(
        "--events",
        default=None,
        metavar="PATH_OR_URL",
        help="turn on POST /events and live answers for users: the event store, a SQLite file "
        "(created if missing) or redis://host:port/db (the live extra); default: off",
    )
    s.add_argument(
        "--state-cache",
        type=int,
        default=10_000,
        metavar="N",
        help="with --events: users whose encoder state stays in memory (LRU; default 10000)",
    )
    from seqrec.cli.events import add_events_args

    add_events_args(sub.add_parser("events", help="the live service's event log: export"))

    sub.add_parser(
        "doctor",
        help="what this installation can do: versions, PyTorch build and "
        "devices, extras, data folders (paste it into a bug report)",
    )
    demo = sub.add_parser(
        "demo",
        help="the quickstart: several models on the shipped dataset "
        "(or on your own file) in one table",
    )
    demo.add_argument(
        "data_shortcut",
        nargs="?",
        metavar="DATA",
        help="a dataset name or your own file / folder (default: ml-latest-small, "
        "shipped with seqrec): which of the models suits your data",
    )
    demo.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="data.KEY=VALUE",
        help="how to read the data and split it, as for train (data.*, split.*, "
        "eval.*; e.g. data.columns=user=customer,item=sku); repeatable",
    )
    demo.add_argument("--models", default=None, help="comma-separated model names")
    demo.add_argument(
        "--out",
        default=None,
        help="where artifacts and results go (default: runs/demo, or "
        "runs/demo-<data> for other data)",
    )
    demo.add_argument("--quick", action="store_true", help="tiny training budgets (for tests)")
    demo.add_argument(
        "--max-seconds",
        type=float,
        default=0.0,
        metavar="N",
        help="escape hatch for slow machines: also stop each neural model after N "
        "seconds of training steps (the table then depends on the machine's speed "
        "and load; default 0: the epoch budget alone)",
    )
    from seqrec.cli.plugins import add_commands

    add_commands(sub)  # commands of other packages (seqrec reproduce: the research layer)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    if not (sys.argv[1:] if argv is None else argv):  # bare `seqrec`: the help, not an error
        parser.print_help()
        return 0
    args = parser.parse_args(argv)
    from seqrec.allocator import retain_freed_memory

    retain_freed_memory()  # this process is seqrec's: keep freed memory for reuse
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    previous = _sigterm_as_interrupt()
    try:
        code = _run(args)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    # under torchrun: end without the interpreter's finalization, where gloo aborts now and then
    dist = sys.modules.get("seqrec.training.distributed")
    if dist is not None:
        dist.exit_if_left_group(code)
    return code


def _raise_interrupt(signum: int, frame: object) -> None:  # noqa: ARG001 - handler signature
    raise KeyboardInterrupt


def _sigterm_as_interrupt() -> object | None:
    """``kill``, a container's stop or a scheduler's preemption send SIGTERM: treat it as Ctrl-C
    (``train`` keeps its last checkpoint and says how to resume) rather than dying without a
    word. Only where SIGTERM has its default action (a caller's handler is left alone; the
    harness and the server install their own). Returns the handler to put back."""
    if threading.current_thread() is not threading.main_thread():
        return None
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return None
    return signal.signal(signal.SIGTERM, _raise_interrupt)


def _run(args) -> int:
    from seqrec.cli import commands, shortcuts

    try:
        shortcuts.fold_shortcuts(args)
        shortcuts.resolve_artifact(args)
        return commands.dispatch(args)
    except SeqRecError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (FileNotFoundError, PermissionError, IsADirectoryError) as exc:
        print(f"error: {exc.strerror}: {exc.filename}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader of stdout went away (`seqrec ... | head`): stop quietly, as Unix tools do;
        # stdout is pointed at devnull so that the interpreter's final flush raises nothing
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
