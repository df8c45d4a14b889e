"""``seqrec reproduce NAME``: argument handling and terminal output of the harness.

:data:`COMMAND` is the ``seqrec.commands`` entry point ``reproduce`` (``pyproject.toml``): the
library's CLI discovers it (:mod:`seqrec.cli.plugins`) without importing this package by name.
Loaded for every ``seqrec`` call, so this module imports nothing heavy at its top.
"""

from __future__ import annotations

import argparse
import re
import signal
import sys
from pathlib import Path

from seqrec.cli.table import format_table
from seqrec.errors import ConfigError
from seqrec.stop import Interrupted

DEFAULT_REPORT_DIR = "docs/reproduce"
"""The checkout's reports (and their overview, ``docs/reproduce/README.md``)."""
_UNIT_SECONDS = (3600, 60, 1)  # the regex groups: hours, minutes, seconds


def parse_duration(text: str | None) -> float | None:
    """``90m`` / ``2h`` / ``2h30m`` / ``1h 5m 30s`` / ``3600s`` / ``3600`` -> seconds (None stays
    None). Units go from hours to seconds, each at most once; a bare number is seconds."""
    if text is None:
        return None
    m = re.fullmatch(
        r"\s*(?:(\d+(?:\.\d+)?)\s*h)?\s*(?:(\d+(?:\.\d+)?)\s*m)?"
        r"\s*(?:(\d+(?:\.\d+)?)\s*s?)?\s*",
        text,
    )
    seconds = (
        sum(float(v) * unit for v, unit in zip(m.groups(), _UNIT_SECONDS, strict=True) if v)
        if m
        else 0.0
    )
    if seconds <= 0:
        raise ConfigError(
            f"--budget must be a positive duration like 90m, 2h, 2h30m or 3600s, got {text!r}"
        )
    return seconds


def _csv(text: str | None, cast=str):
    if text is None:
        return None
    try:
        return {cast(x.strip()) for x in text.split(",") if x.strip()}
    except ValueError:
        raise ConfigError(f"expected a comma-separated list, got {text!r}") from None


def run(args: argparse.Namespace) -> int:
    import logging

    from seqrec_lab.harness import plan, reproduce
    from seqrec_lab.report import write_report
    from seqrec_lab.spec import load_table

    # one line per validation of every run (the inline path; workers configure their own)
    logging.getLogger("seqrec.training.trainer").setLevel(logging.INFO)
    if args.name is None:  # `seqrec reproduce` alone: what there is to reproduce
        from seqrec_lab.spec import table_titles

        print(format_table(["table", "title"], [[n, t] for n, t in table_titles()]))
        print(
            "\nseqrec reproduce TABLE --dry-run lists its runs; seqrec reproduce TABLE trains them "
            "and writes docs/reproduce/TABLE.md"
        )
        return 0
    table = load_table(args.name)
    budget = parse_duration(args.budget)
    runs = table.select(
        _csv(args.models), _csv(args.datasets), _csv(args.seeds, int), _csv(args.runs)
    )
    if not runs:
        raise ConfigError(f"no run of table {table.name!r} matches the selection")
    runs_dir, results_dir, report_dir = (
        Path(args.runs_dir),
        Path(args.results_dir),
        Path(args.report_dir),
    )
    state_dir = _state_dir(args.state_dir)
    if args.dry_run or args.report_only:
        planned = plan(table, runs, runs_dir, results_dir)
        rows = [
            [
                p.spec.run_id,
                p.spec.seed,
                p.spec.model,
                p.spec.dataset,
                p.key,
                _status(p, runs_dir, state_dir),
            ]
            for p in planned
        ]
        print(format_table(["run", "seed", "model", "dataset", "key", "status"], rows))
        for p in planned:
            if p.unavailable and not p.done:
                print(f"no data for {p.spec.run_id}: {p.unavailable}")
        if args.report_only:
            everything = plan(table, table.runs, runs_dir, results_dir)
            print(f"report: {write_report(table, everything, report_dir)}")
            _readme(report_dir)
        return 0
    try:
        outcome = reproduce(
            table,
            runs,
            workers=args.workers,
            threads=args.threads,
            budget_seconds=budget,
            runs_dir=runs_dir,
            results_dir=results_dir,
            report_dir=report_dir,
            on_event=lambda msg: print(msg, flush=True),
            state_dir=state_dir,
        )
    except Interrupted as exc:
        print(f"interrupted: {exc}", file=sys.stderr, flush=True)
        return 128 + (exc.signum or signal.SIGINT)  # the shell's code for death by that signal
    path = outcome.report
    print(f"report: {path} (+ {path.with_suffix('.html').name})")
    _readme(report_dir)
    for run_id in outcome.skipped:
        print(f"skipped: {run_id}: its dataset is not on this machine (see above)")
    for run_id, why in outcome.failed.items():
        print(f"failed: {run_id}: {why}")
    return 1 if outcome.failed or outcome.skipped else 0


def _state_dir(option: str | None) -> Path | None:
    """``--state-dir``: a folder, 'none' (no state kept), or unset (the harness's default)."""
    from seqrec_lab.harness import default_state_dir

    if option is None:
        return default_state_dir()
    return None if option == "none" else Path(option)


def _status(p, runs_dir: Path, state_dir: Path | None) -> str:
    """A planned run's state for the dry-run table; for an unfinished run, how far it got and
    whether the same command would resume it here or start it over."""
    if p.done:
        return "cached (no data here)" if p.unavailable else "cached"
    if p.unavailable:
        return "no data" + (" (partial)" if p.partial else "")
    from seqrec_lab.runner import is_training

    if is_training(runs_dir / p.key):
        return "training now" + _live_progress(runs_dir / p.key)
    from seqrec_lab.harness import resume_source

    found = resume_source(p, runs_dir, state_dir)
    if found is None:
        resume = "no checkpoint here: restarts"
    else:
        path, size = found
        where = "run dir" if runs_dir / p.key in (path, *path.parents) else "saved state"
        resume = f"resumes from its {where} ({size / 1e6:.1f} MB)"
    if not p.partial:
        return "to train" if found is None else f"to train; {resume}"
    r = p.partial
    budget = (r.get("config") or {}).get("model_config", {}).get("epochs")
    progress = _progress(
        r.get("epochs"), budget, r.get("val_metric", ""), r.get("best_valid"), r.get("best_epoch")
    )
    return f"partial ({progress}); {resume}"


def _progress(epoch, budget, metric: str, best, best_epoch) -> str:
    text = f"epoch {epoch}" + (f"/{budget}" if budget else "")
    if best is not None:
        text += f", best valid {metric + ' ' if metric else ''}{best:.4f} at epoch {best_epoch}"
    return text


def _live_progress(run_dir: Path) -> str:
    """`` (epoch 12/40, best valid ...)`` from a training run's own log ('' before its first
    validation, or when its files are being rewritten)."""
    import json

    try:
        lines = (run_dir / "validation.jsonl").read_text().splitlines()
        rows = [json.loads(line) for line in lines if line.strip()]
        config = json.loads((run_dir / "run.json").read_text()).get("config", {})
    except (OSError, ValueError):
        return ""
    if not rows:
        return ""
    metric = config.get("val_metric", "")
    best = max(rows, key=lambda row: row["metrics"].get(metric, float("-inf")))
    return (
        " ("
        + _progress(
            rows[-1]["epoch"],
            config.get("epochs"),
            metric,
            best["metrics"].get(metric),
            best["epoch"],
        )
        + ")"
    )


def _readme(report_dir: Path) -> None:
    """Refresh the results overview of ``report_dir`` (``README.md`` beside its reports, built
    from that directory's summaries only); the repository's ``README.md`` is never written."""
    from seqrec_lab.readme import write_overview

    print(f"results overview: {write_overview(report_dir)}")


class ReproduceCommand:
    """``seqrec reproduce``: the ``seqrec.commands`` plugin protocol (help, add_arguments, run)."""

    help = (
        "run a paper's table (configs/reproduce/NAME.toml) and write its report "
        "(docs/reproduce/NAME.md/.html)"
    )

    @staticmethod
    def add_arguments(rp: argparse.ArgumentParser) -> None:
        rp.add_argument(
            "name",
            nargs="?",
            help="table name (configs/reproduce/NAME.toml) or a path to a "
            "table file; none: list the tables",
        )
        rp.add_argument("--models", help="only these models (comma-separated registry names)")
        rp.add_argument("--datasets", help="only these datasets (comma-separated)")
        rp.add_argument("--seeds", help="only these seeds (comma-separated integers)")
        rp.add_argument("--runs", help="only these run ids (comma-separated)")
        rp.add_argument(
            "--workers", type=int, default=1, help="runs trained at once, one process each"
        )
        rp.add_argument("--threads", type=int, default=1, help="torch threads per worker")
        rp.add_argument(
            "--budget",
            help="wall-clock budget (e.g. 90m, 2h, 2h30m, 3600s): unfinished runs "
            "checkpoint and report their best so far; the same command continues them",
        )
        rp.add_argument(
            "--dry-run", action="store_true", help="list the runs and what is cached; train nothing"
        )
        rp.add_argument(
            "--report-only", action="store_true", help="rewrite the report from the recorded runs"
        )
        rp.add_argument(
            "--runs-dir", default="runs/reproduce", help="checkpoints (default runs/reproduce)"
        )
        rp.add_argument(
            "--results-dir",
            default="docs/reproduce/runs",
            help="run records (default docs/reproduce/runs)",
        )
        rp.add_argument(
            "--report-dir",
            default=DEFAULT_REPORT_DIR,
            help=f"reports and their overview README.md (default {DEFAULT_REPORT_DIR})",
        )
        rp.add_argument(
            "--state-dir",
            default=None,
            help="local folder where unfinished runs keep their "
            "checkpoint (never committed; default $SEQREC_STATE_DIR, else .seqrec-state; "
            "'none' disables)",
        )

    @staticmethod
    def run(args: argparse.Namespace) -> int:
        return run(args)


COMMAND = ReproduceCommand()
