"""Validation curves of the ML-1M full cross-entropy runs (SASRec variants, HSTU, LRURec).

Reads each run's validation log (``benchmarks/logs/runs/<run>/validation.jsonl``, or the copy
``docs/results/<run>.validation.jsonl`` kept by the benchmarks) and writes
``docs/results/ml1m_validation_curves.{png,json,md}``: validation NDCG@10 against epoch and
against training seconds, the curve data itself (so the figure can be redrawn from the JSON)
and a table of the best validation of every run. Every run uses the same split (iterative
5-core, leave-last-out, full ranking, history filter, validation every 2 epochs). Runs whose
log is missing are skipped with a message.

    .venv/bin/python benchmarks/plot_ml1m_curves.py
    .venv/bin/python benchmarks/plot_ml1m_curves.py --runs sasrec_ml1m_ce_windows,lrurec_ml1m
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from seqrec.evaluation.results import base_record

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results"
RUNS = {
    "sasrec_ml1m_ce_windows": "SASRec, reference layout, dropout 0.1",
    "sasrec_ml1m_ce_dross": "SASRec, + Dross init / attention dropout",
    "sasrec_ml1m_ce_fromstart": "SASRec, Dross code + positions from start",
    "sasrec_ml1m_ce_lruhp": "SASRec, LRURec-code hyperparameters",
    "hstu_ml1m_ce_hstu": "HSTU, full CE",
    "lrurec_ml1m": "LRURec",
}


def read_log(run: str) -> list[dict] | None:
    for path in (ROOT / "benchmarks" / "logs" / "runs" / run / "validation.jsonl",
                 OUT / f"{run}.validation.jsonl"):
        if path.exists():
            return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", default=",".join(RUNS), help="comma-separated run names")
    p.add_argument("--metric", default="NDCG@10")
    args = p.parse_args()

    curves = {}
    for run in args.runs.split(","):
        log = read_log(run)
        if not log:
            print(f"skipping {run}: no validation log", file=sys.stderr)
            continue
        curves[run] = [{"epoch": r["epoch"], "step": r["step"],
                        "train_seconds": round(r["train_seconds"], 1),
                        args.metric: r["metrics"][args.metric]} for r in log]
    if not curves:
        raise SystemExit("no validation logs found")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for run, pts in curves.items():
        label = RUNS.get(run, run)
        axes[0].plot([q["epoch"] for q in pts], [q[args.metric] for q in pts], ".-", label=label)
        axes[1].plot([q["train_seconds"] / 60 for q in pts], [q[args.metric] for q in pts], ".-",
                     label=label)
    axes[0].set_xlabel("epoch")
    axes[1].set_xlabel("training minutes (2-core CPU, shared; 1 or 2 threads per run)")
    axes[0].set_ylabel(f"validation {args.metric}")
    for ax in axes:
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=8, loc="lower right")
    fig.suptitle("ML-1M, leave-last-out, full ranking, history filter: validation curves")
    fig.tight_layout()
    fig.savefig(OUT / "ml1m_validation_curves.png", dpi=110)

    best = {run: max(pts, key=lambda q: q[args.metric]) for run, pts in curves.items()}
    record = base_record(benchmark="ml1m_validation_curves", dataset="ml-1m",
                         metric=args.metric, curves=curves, best=best,
                         labels={run: RUNS.get(run, run) for run in curves})
    (OUT / "ml1m_validation_curves.json").write_text(json.dumps(record, indent=2) + "\n")
    lines = [f"# ML-1M validation curves ({args.metric})", "",
             f"Command: `{record['command']}`; created {record['created']}. "
             "Same split for every run (iterative 5-core, leave-last-out, full ranking, history "
             "filter); the curve data are in `ml1m_validation_curves.json`.", "",
             "![validation curves](ml1m_validation_curves.png)", "",
             f"| run | what | validations | last epoch | best valid {args.metric} | at epoch | "
             "train min to best |", "|---|---|---:|---:|---:|---:|---:|"]
    for run, pts in curves.items():
        b = best[run]
        lines.append(f"| {run} | {RUNS.get(run, run)} | {len(pts)} | {pts[-1]['epoch']} | "
                     f"{b[args.metric]:.4f} | {b['epoch']} | {b['train_seconds'] / 60:.0f} |")
    (OUT / "ml1m_validation_curves.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
