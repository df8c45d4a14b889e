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

``--set tie_order`` draws the runs of ``bench_ml1m_tie_order.py`` instead (users 1-2999 under
three orders of same-second ratings) into ``docs/results/ml1m_tie_order_curves.*``.
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
TIE_ORDER_RUNS = {
    f"ml1m_tie_order_{model}{order}": f"{label}, {order.strip('_')} order"
    for model, label in (("", "SASRec"), ("lrurec_", "LRURec"),
                         ("lrurec_authors_", "LRURec (authors' code)"))
    for order in ("file", "stable", "time_item")
}
SETS = {  # name: (runs, output stem, what the runs share)
    "ml1m": (RUNS, "ml1m_validation_curves",
             "ML-1M (iterative 5-core), leave-last-out, full ranking, history filter"),
    "tie_order": (TIE_ORDER_RUNS, "ml1m_tie_order_curves",
                  "ML-1M users 1-2999 (items of the 5-core), leave-last-out, full ranking, "
                  "history filter; file / stable / time_item order of same-second ratings"),
}


ORDER_COLOURS = {"file": "tab:blue", "stable": "tab:orange", "time_item": "tab:green"}


def style(run: str) -> dict:
    """Tie-order runs: colour = order, line = model; other runs: matplotlib's cycle."""
    if not run.startswith("ml1m_tie_order_"):
        return {}
    order = next(o for o in ORDER_COLOURS if run.endswith(o))
    line = "--" if "lrurec" not in run else (":" if "authors" in run else "-")
    return {"color": ORDER_COLOURS[order], "linestyle": line}


def read_log(run: str) -> list[dict] | None:
    for path in (ROOT / "benchmarks" / "logs" / "runs" / run / "validation.jsonl",
                 OUT / f"{run}.validation.jsonl"):
        if path.exists():
            return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--set", default="ml1m", choices=tuple(SETS))
    p.add_argument("--runs", default=None, help="comma-separated run names (default: the set's)")
    p.add_argument("--metric", default="NDCG@10")
    args = p.parse_args()
    labels, stem, shared = SETS[args.set]
    args.runs = args.runs or ",".join(labels)

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
        label = labels.get(run, run)
        axes[0].plot([q["epoch"] for q in pts], [q[args.metric] for q in pts], ".-", label=label,
                     **style(run))
        axes[1].plot([q["train_seconds"] / 60 for q in pts], [q[args.metric] for q in pts], ".-",
                     label=label, **style(run))
    axes[0].set_xlabel("epoch")
    axes[1].set_xlabel("training minutes (2-core CPU, shared; 1 or 2 threads per run)")
    axes[0].set_ylabel(f"validation {args.metric}")
    for ax in axes:
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=8, loc="lower right")
    fig.suptitle(f"validation curves: {shared}", fontsize=9)
    fig.tight_layout()
    fig.savefig(OUT / f"{stem}.png", dpi=110)

    best = {run: max(pts, key=lambda q: q[args.metric]) for run, pts in curves.items()}
    record = base_record(benchmark=stem, dataset="ml-1m", data=shared,
                         metric=args.metric, curves=curves, best=best,
                         labels={run: labels.get(run, run) for run in curves})
    (OUT / f"{stem}.json").write_text(json.dumps(record, indent=2) + "\n")
    lines = [f"# ML-1M validation curves ({args.metric})", "",
             f"Command: `{record['command']}`; created {record['created']}. "
             f"Every run: {shared}. The curve data are in `{stem}.json`.", "",
             f"![validation curves]({stem}.png)", "",
             f"| run | what | validations | last epoch | best valid {args.metric} | at epoch | "
             "train min to best |", "|---|---|---:|---:|---:|---:|---:|"]
    for run, pts in curves.items():
        b = best[run]
        lines.append(f"| {run} | {labels.get(run, run)} | {len(pts)} | {pts[-1]['epoch']} | "
                     f"{b[args.metric]:.4f} | {b['epoch']} | {b['train_seconds'] / 60:.0f} |")
    (OUT / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
