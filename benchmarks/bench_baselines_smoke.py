"""Smoke check that each classic baseline learns (issue 16): a short, time-boxed run of MF, FISM,
FPMC, GRU4Rec, NARM and Caser beside Pop on ML-100K (943 users, 1,682 items, iterative 5-core),
leave-last-out, full ranking, history filter. Each model uses its reproduction config
(``configs/<model>_ml1m.toml``, Caser ``configs/caser_beauty.toml``) with the data switched to
ML-100K, max_len 100 (``--max-len``), validation every epoch, no early stopping and a training budget of
``--seconds`` (the best validation NDCG@10 is kept). Not a reproduction: the budgets are far
too short for the published numbers; the check is only "far above Pop".

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_baselines_smoke.py --seconds 90 \
        --max-len 50 --lr 3e-3

Measured (2026-11-30, shared machine, load average 7-12 on 2 cores), valid NDCG@10 after 90 s:
Pop 0.0335, MF 0.0743, FISM 0.1005, FPMC 0.1187, GRU4Rec 0.1146, NARM 0.1145, Caser 0.0829
(2.2-3.5x Pop). With the configs' lr 1e-3 and max_len 100 the recurrent models and Caser had
too few steps in 90 s to leave Pop (GRU4Rec 0.0341 after 101 steps, NARM 0.0097 after 33).

Writes docs/results/baselines_smoke_ml100k.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from seqrec.config import load_experiment  # noqa: E402
from seqrec.evaluation.results import base_record, hardware_line  # noqa: E402
from seqrec.experiment import prepare_data, run_experiment  # noqa: E402

CONFIGS = {"pop": None, "mf": "mf_ml1m", "fism": "fism_ml1m", "fpmc": "fpmc_ml1m",
           "gru4rec": "gru4rec_ml1m", "narm": "narm_ml1m", "caser": "caser_beauty"}
SHOWN = ("NDCG@10", "Recall@10")


def overrides(name: str, seconds: float, dataset: str, max_len: int, lr: float | None) -> list[str]:
    over = [f"data.name={dataset}", "data.filter=k_core", "data.min_item=5",
            "eval.seen_filter=history"]
    if name == "pop":
        return [*over, "model.name=pop"]
    if lr is not None:
        over.append(f"train.lr={lr}")
    return [*over, f"model.max_len={max_len}", "train.eval_every=1", "train.patience=0",
            "train.epochs=1000", f"train.max_train_seconds={seconds}", "train.num_threads=1",
            "train.val_metric=NDCG@10"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=90.0, help="training budget per model")
    p.add_argument("--dataset", default="ml-100k")
    p.add_argument("--max-len", type=int, default=100)
    p.add_argument("--lr", type=float, default=None, help="override every config's lr")
    p.add_argument("--stem", default=None, help="output name (default baselines_smoke_<dataset>)")
    p.add_argument("--models", nargs="*", default=list(CONFIGS))
    p.add_argument("--out", default=str(ROOT / "docs" / "results"))
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    data = None
    runs = []
    for name in args.models:
        cfg = CONFIGS[name]
        exp = load_experiment(ROOT / "configs" / f"{cfg}.toml" if cfg else None,
                              overrides(name, args.seconds, args.dataset, args.max_len, args.lr))
        data = data or prepare_data(exp)
        model, record = run_experiment(exp, data)
        log = getattr(model, "training_log", None)
        runs.append({
            "model": name, "config": f"configs/{cfg}.toml" if cfg else None,
            "valid": {m: record["metrics"]["valid"][m] for m in SHOWN},
            "test": {m: record["metrics"]["test"][m] for m in SHOWN},
            "epochs": getattr(log, "epochs_run", None), "steps": getattr(log, "global_step", None),
            "best_epoch": getattr(log, "best_epoch", None),
            "train_seconds": round(record["train_seconds"], 1),
        })
        print(json.dumps(runs[-1]), flush=True)
    record = base_record(benchmark="baselines_smoke", dataset=args.dataset,
                         fingerprint=data.prepared.fingerprint(), protocol="leave-last-out",
                         ranking="full", seen_filter="history", budget_seconds=args.seconds,
                         max_len=args.max_len, lr=args.lr,
                         runs=runs)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = args.stem or f"baselines_smoke_{args.dataset.replace('-', '')}"
    (out / f"{stem}.json").write_text(json.dumps(record, indent=2) + "\n")
    pop = next((r for r in runs if r["model"] == "pop"), None)
    lines = [f"# Baselines smoke check on {args.dataset} ({args.seconds:g} s of training each)", "",
             "Leave-last-out, full ranking, history filter, iterative 5-core; each model's "
             f"reproduction config with max_len {args.max_len}"
             + (f", lr {args.lr:g}" if args.lr else "") + ", validation every epoch, best validation "
             "NDCG@10 kept. Not a reproduction: only checks that each model learns (vs Pop).", "",
             "| model | valid NDCG@10 | valid Recall@10 | test NDCG@10 | test Recall@10 | x Pop (valid NDCG@10) | epochs | train s |",
             "|---|---|---|---|---|---|---|---|"]
    for r in runs:
        ratio = (f"{r['valid']['NDCG@10'] / pop['valid']['NDCG@10']:.2f}"
                 if pop and pop["valid"]["NDCG@10"] else "")
        lines.append(f"| {r['model']} | {r['valid']['NDCG@10']:.4f} | {r['valid']['Recall@10']:.4f} | "
                     f"{r['test']['NDCG@10']:.4f} | {r['test']['Recall@10']:.4f} | {ratio} | "
                     f"{r['epochs'] if r['epochs'] is not None else ''} | {r['train_seconds']} |")
    lines += ["", f"Command: `{record['command']}`  ", f"Hardware: {hardware_line(record['hardware'])}  ",
              f"Data fingerprint: {record['fingerprint']}, seed 0, created {record['created']}", ""]
    (out / f"{stem}.md").write_text("\n".join(lines))


if __name__ == "__main__":
    main()
