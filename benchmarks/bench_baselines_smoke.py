"""Smoke check that each baseline learns (issue 16): a short, time-boxed run of MF, FISM, FPMC,
GRU4Rec, NARM, Caser, BERT4Rec and FMLP-Rec beside Pop on ML-100K (943 users, 1,682 items,
iterative 5-core), leave-last-out, full ranking, history filter. Each model uses its reproduction
config (``configs/<model>_ml1m.toml``, Caser ``configs/caser_beauty.toml``) with the data
switched to ML-100K, ``--max-len``, validation every epoch (or every ``--eval-every-steps``),
no early stopping and a training budget of ``--seconds`` (the best validation NDCG@10 is kept).
Not a reproduction: the budgets are far too short for the published numbers; the check is only
"far above Pop".

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_baselines_smoke.py --seconds 90 \\
        --max-len 50 --lr 3e-3 --models pop mf fism fpmc gru4rec narm caser
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_baselines_smoke.py --seconds 170 \\
        --eval-every-steps 25 --set train.batch_size=32 --models pop bert4rec fmlprec

Writes docs/results/baselines_smoke_<dataset>.{json,md}. A record lists its ``setups`` (the
settings and command of each invocation) and every run names its setup, so one file can hold
models measured with different budgets: the committed ML-100K file holds both commands above
(measured on 2026-11-30 by the two former scripts, this one and ``bench_baselines_b_smoke.py``).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from seqrec.config import load_experiment  # noqa: E402
from seqrec.evaluation.results import base_record, hardware_line  # noqa: E402
from seqrec.experiment import prepare_data, run_experiment  # noqa: E402

CONFIGS = {"pop": None, "mf": "mf_ml1m", "fism": "fism_ml1m", "fpmc": "fpmc_ml1m",
           "gru4rec": "gru4rec_ml1m", "narm": "narm_ml1m", "caser": "caser_beauty",
           "bert4rec": "bert4rec_ml1m", "fmlprec": "fmlprec_ml1m"}
SHOWN = ("NDCG@10", "Recall@10")


def overrides(name: str, dataset: str, setup: dict[str, Any]) -> list[str]:
    over = [f"data.name={dataset}", "data.filter=k_core", "data.min_item=5",
            "eval.seen_filter=history"]
    if name == "pop":
        return [*over, "model.name=pop"]
    if setup["lr"] is not None:
        over.append(f"train.lr={setup['lr']}")
    if setup["eval_every_steps"]:
        over.append(f"train.eval_every_steps={setup['eval_every_steps']}")
    return [*over, f"model.max_len={setup['max_len']}", "train.eval_every=1", "train.patience=0",
            "train.epochs=100000", f"train.max_train_seconds={setup['budget_seconds']}",
            "train.num_threads=1", "train.val_metric=NDCG@10", *setup["overrides"]]


def describe(setup: dict[str, Any]) -> str:
    """One line: what a setup changed in the models' reproduction configs."""
    parts = [f"{setup['budget_seconds']:g} s of training", f"max_len {setup['max_len']}"]
    if setup["lr"] is not None:
        parts.append(f"lr {setup['lr']:g}")
    every = setup["eval_every_steps"]
    parts.append(f"validation every {every} steps" if every else "validation every epoch")
    if setup["overrides"]:
        parts.append("overrides " + ", ".join(setup["overrides"]))
    return ", ".join(parts)


def render(record: dict[str, Any]) -> str:
    """The Markdown beside the JSON: one table over every run, its setup named per row."""
    runs, setups = record["runs"], record["setups"]
    pop = next((r for r in runs if r["model"] == "pop"), None)
    lines = [f"# Baselines smoke check on {record['dataset']}", "",
             "Leave-last-out, full ranking, history filter, iterative 5-core; each model's "
             "reproduction config with the setup's changes, no early stopping, best validation "
             "NDCG@10 kept. Not a reproduction: only checks that each model learns (vs Pop).", ""]
    for i, s in enumerate(setups, 1):
        lines.append(f"- setup {i} ({', '.join(s['models'])}): {describe(s)}; "
                     f"`{s['command']}`, {s['created']}")
    lines += ["", "| model | setup | valid NDCG@10 | valid Recall@10 | test NDCG@10 | test Recall@10 | "
              "x Pop (valid NDCG@10) | epochs | best epoch | steps | train s |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    blank = lambda v: "" if v is None else v  # noqa: E731
    for r in runs:
        ratio = (f"{r['valid']['NDCG@10'] / pop['valid']['NDCG@10']:.2f}"
                 if pop and pop["valid"]["NDCG@10"] else "")
        lines.append(f"| {r['model']} | {r['setup'] + 1} | {r['valid']['NDCG@10']:.4f} | "
                     f"{r['valid']['Recall@10']:.4f} | {r['test']['NDCG@10']:.4f} | "
                     f"{r['test']['Recall@10']:.4f} | {ratio} | {blank(r['epochs'])} | "
                     f"{blank(r['best_epoch'])} | {blank(r['steps'])} | {r['train_seconds']} |")
    lines += ["", f"Hardware: {hardware_line(record['hardware'])}  ",
              f"Data fingerprint: {record['fingerprint']}, seed {record['seed']}, created {record['created']}", ""]
    if record.get("notes"):
        lines += ["Notes:", "", *[f"- {n}" for n in record["notes"]], ""]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=90.0, help="training budget per model")
    p.add_argument("--dataset", default="ml-100k")
    p.add_argument("--max-len", type=int, default=100)
    p.add_argument("--lr", type=float, default=None, help="override every config's lr")
    p.add_argument("--eval-every-steps", type=int, default=0,
                   help="validate every N steps (0: every epoch); for models with few long epochs")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                   help="extra overrides for the neural models, e.g. train.batch_size=32")
    p.add_argument("--stem", default=None, help="output name (default baselines_smoke_<dataset>)")
    p.add_argument("--models", nargs="*", default=list(CONFIGS), choices=list(CONFIGS))
    p.add_argument("--out", default=str(ROOT / "docs" / "results"))
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    record = base_record(benchmark="baselines_smoke", dataset=args.dataset, protocol="leave-last-out",
                         ranking="full", seen_filter="history", seed=0)
    setup = {"models": args.models, "budget_seconds": args.seconds, "max_len": args.max_len,
             "lr": args.lr, "eval_every_steps": args.eval_every_steps, "overrides": args.set,
             "command": record["command"], "created": record["created"]}
    data = None
    runs = []
    for name in args.models:
        cfg = CONFIGS[name]
        exp = load_experiment(ROOT / "configs" / f"{cfg}.toml" if cfg else None,
                              overrides(name, args.dataset, setup))
        data = data or prepare_data(exp)
        model, result = run_experiment(exp, data)
        log = getattr(model, "training_log", None)
        runs.append({
            "model": name, "setup": 0, "config": f"configs/{cfg}.toml" if cfg else None,
            "valid": {m: result["metrics"]["valid"][m] for m in SHOWN},
            "test": {m: result["metrics"]["test"][m] for m in SHOWN},
            "epochs": getattr(log, "epochs_run", None), "steps": getattr(log, "global_step", None),
            "best_epoch": getattr(log, "best_epoch", None),
            "train_seconds": round(result["train_seconds"], 1),
        })
        print(json.dumps(runs[-1]), flush=True)
    record.update(fingerprint=data.prepared.fingerprint(), setups=[setup], runs=runs)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = args.stem or f"baselines_smoke_{args.dataset.replace('-', '')}"
    (out / f"{stem}.json").write_text(json.dumps(record, indent=2) + "\n")
    (out / f"{stem}.md").write_text(render(record))


if __name__ == "__main__":
    main()
