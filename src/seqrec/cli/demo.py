"""``seqrec demo``: the quickstart. Several models (Pop, PureSVD and the neural models with their
measured default recipes) on the shipped MovieLens sample, or on the user's own log, in one
table, with a note for every neural model that does not beat the baselines and how to give it
more."""

from __future__ import annotations

import argparse
import shlex
import time
from pathlib import Path
from typing import Any

from seqrec.cli.results import results_header, results_table, slug, write_records
from seqrec.config import Experiment, load_experiment
from seqrec.errors import ConfigError, DataError, SeqRecError

# Short training budgets for the quickstart on ml-latest-small (keys a model lacks are ignored).
DEMO_MODELS = ("pop", "puresvd", "sasrec", "lrurec", "hstu")
# Neural models train with their default recipe, early stopping on validation included
# (patience 30), under an EPOCH budget, never a wall-clock one: a time cap stops them at an
# epoch that depends on the machine's load, and on a busy machine a model cut short falls below
# PureSVD. They train on one torch thread: float sums split over more threads round
# differently, and over a hundred epochs the runs drift apart (on the shipped data one thread
# and two gave different tables). Same seed, same table on any machine with the same kind of
# CPU kernels (AVX2 and AVX-512 round differently too; results record which) (`seqrec demo
# --max-seconds N` is the explicit opt-out for slow machines). The cap of 100 epochs is above
# every patience stop seen on the shipped data and bounds the worst case
# (docs/decisions/demo-epoch-budget.md).
_NEURAL_DEMO = {"epochs": 100, "max_len": 50, "num_threads": 1}
DEMO_PARAMS: dict[str, dict[str, Any]] = {
    "puresvd": {"rank": 64, "scaling": 0.4},
    "sasrec": dict(_NEURAL_DEMO),
    "lrurec": dict(_NEURAL_DEMO),
    "hstu": dict(_NEURAL_DEMO),
}
QUICK_PARAMS = {"epochs": 1, "max_len": 20, "rank": 8, "hidden": 16, "hidden_size": 16}


def run(args: argparse.Namespace) -> int:
    """``seqrec demo [DATA]``: the demo's models on the shipped dataset or the user's log, one table."""
    import shutil
    import sys

    from seqrec.cli import runs
    from seqrec.evaluation.results import write_result
    from seqrec.experiment import prepare_data, run_experiment
    from seqrec.registry import MODELS, canonical_model_name, get_model

    max_seconds = getattr(args, "max_seconds", 0.0) or 0.0
    if max_seconds < 0:
        raise ConfigError(f"--max-seconds must be >= 0 (0 = no time cap), got {max_seconds!r}")
    wanted = (
        [canonical_model_name(m.strip()) for m in args.models.split(",")]
        if args.models
        else [m for m in DEMO_MODELS if m in MODELS]
    )
    for name in wanted:
        get_model(name)  # an unknown name fails before any training, naming the closest
    overrides = list(getattr(args, "overrides", []) or [])
    models_set = [o for o in overrides if _override_section(o) in ("model", "train")]
    if models_set:
        raise ConfigError(
            f"the demo trains each model with its own recipe: {models_set[0]!r} is "
            "not a demo setting (--models picks the models; seqrec train sets them)"
        )
    data_name = getattr(args, "data_shortcut", None) or "ml-latest-small"
    out = Path(
        args.out
        or ("runs/demo" if data_name == "ml-latest-small" else f"runs/demo-{slug(data_name)}")
    )
    base = load_experiment(None, [f"data.name={data_name}", *overrides])
    t0 = time.perf_counter()
    data = prepare_data(base)
    print(
        f"{Path(data_name).name}: {data.prepared.n_users} users, {data.prepared.n_items} items, "
        f"{len(data.prepared.interactions):,} interactions; {base.split.protocol}, full ranking, "
        f"seen items filtered ({time.perf_counter() - t0:.1f}s to load)"
    )
    own_data = data_name != "ml-latest-small"
    records = []
    for name in wanted:
        params = demo_params(name, quick=args.quick, max_seconds=max_seconds)
        exp = Experiment(
            data=base.data,
            split=base.split,
            model=name,
            model_params=params,
            eval=base.eval,
            seed=base.seed,
            output=str(out),
        )
        cfg = exp.model_config()
        print(f"training {name} ...{_budget_text(cfg)}", flush=True)
        # staged: a model folder appears only complete, with its result inside (an interrupted
        # demo leaves finished models and no half-written folder)
        staging = out / f".{name}.partial"
        shutil.rmtree(staging, ignore_errors=True)
        try:
            _, record = run_experiment(
                exp,
                data=data,
                progress=sys.stderr.isatty(),
                save_dir=staging,
                fit_options={"on_epoch": runs.EpochPrinter(name)},
            )
        except SeqRecError as exc:  # your data may not suit a model (too short histories...)
            if not own_data:
                raise
            print(f"skipped {name}: {exc}", flush=True)
            shutil.rmtree(staging, ignore_errors=True)
            continue
        write_result(record, staging, "result")
        runs.publish_dir(staging, out / name)
        records.append(record)
    if not records:
        raise DataError(f"no model of the demo could train on {data_name} (see the lines above)")
    write_records(records, out, "demo")
    print()
    print(results_header(records[0]))
    print(results_table(records))
    data_args = (
        ""
        if not own_data
        else shlex.join([data_name, *[a for o in overrides for a in ("--set", o)]])
    )
    for line in demo_verdicts(records, data_args=data_args):
        print(line)
    last = records[-1]["model"]
    users = data.prepared.user_raw
    # a stored user: a model that reads time (HSTU) gets the user's stored times with it
    query = f"--user {shlex.quote(str(users[0]))}" if len(users) else "ITEM_ID"
    print(f"\nartifacts and results in {out}/; try: seqrec recommend {out}/{last} {query}")
    return 0


def _override_section(assignment: str) -> str:
    """The section a ``--set`` assignment goes to (``data.sep=;`` -> data, ``epochs=3`` -> train)."""
    from seqrec.config import section_of

    key = assignment.split("=", 1)[0].strip()
    return key.split(".", 1)[0] if "." in key else section_of(key)


def demo_params(name: str, quick: bool = False, max_seconds: float = 0.0) -> dict[str, Any]:
    """The config overrides the demo trains model ``name`` with: ``DEMO_PARAMS`` (then
    ``QUICK_PARAMS`` if ``quick``, and a cap of ``max_seconds`` of training if > 0), keeping
    only the fields its config has."""
    from seqrec.registry import settings_fields

    valid = settings_fields(name)
    params = dict(DEMO_PARAMS.get(name, {}))
    if quick:
        params.update(QUICK_PARAMS)
    if max_seconds:
        params["max_train_seconds"] = max_seconds
    return {k: v for k, v in params.items() if k in valid}


# How to give a losing model more, by what stopped it (only --max-seconds sets a time budget).
_TRAIN = "seqrec train {data}-m {model} --set model.max_len=50"
_REMEDY = {
    "time_budget": "Rerun the demo without --max-seconds (its epoch budget alone does not "
    "depend on the machine's load)",
    "epochs": "Give it more epochs: " + _TRAIN + " --set train.epochs=400",
    "patience": "Give it more patience: " + _TRAIN + " --set train.patience=60",
}


def demo_verdicts(
    records: list[dict[str, Any]], metric: str = "NDCG@10", data_args: str = ""
) -> list[str]:
    """One line per neural model of the demo that does NOT beat the best baseline (Pop,
    PureSVD) on test ``metric``, saying why as far as the record tells (its training budget,
    whether validation was still improving) and how to give it more (``data_args``: the DATA
    and ``--set`` of the demo, for a command on the same data); a line saying they all win
    otherwise."""
    from seqrec.cli import runs

    base = [r for r in records if r["model"] in ("pop", "puresvd")]
    neural = [
        r for r in records if r.get("epochs") is not None and r["model"] not in ("pop", "puresvd")
    ]
    if not base or not neural:
        return []
    best = max(base, key=lambda r: r["metrics"]["test"].get(metric, 0.0))
    bar = best["metrics"]["test"].get(metric, 0.0)
    lines, losers = [], []
    for r in neural:
        value = r["metrics"]["test"].get(metric, 0.0)
        if value > bar:
            continue
        losers.append(r["model"])
        stopped = r.get("stopped") or "-"
        why = f"stopped by {runs.STOP_TEXT.get(stopped, stopped)} after {r.get('epochs')} epoch(s)"
        if stopped == "time_budget":
            why += (
                "; the --max-seconds cap is too short for this model to get past the popularity "
                "ranking on this machine"
            )
        lines.append(
            f"note: {r['model']} ({value:.4f}) does not beat {best['model']} ({bar:.4f}) on test "
            f"{metric}: {why}. {_REMEDY.get(stopped, _REMEDY['patience']).format(model=r['model'], data=data_args + ' ' if data_args else '')}"
        )
    if not losers:
        lines.append(
            f"every neural model beats the best baseline ({best['model']}, {bar:.4f}) on test {metric}"
        )
    return ["", *lines]


def _budget_text(cfg: Any) -> str:
    """The stop rules of a neural config, shown before it trains (empty for the baselines)."""
    if not hasattr(cfg, "epochs"):
        return ""
    text = f" (at most {cfg.epochs} epochs, " + (
        f"early stop after {cfg.patience} validations without a better {cfg.val_metric}"
        if cfg.patience
        else "no early stopping"
    )
    if getattr(cfg, "max_train_seconds", 0):
        text += f", at most {cfg.max_train_seconds:g} s of training"
    return text + ")"
