"""Issue 2, must-show 1: ML-1M load + preprocess + leave-last-out in < 3 s, full-ranking
evaluation of all 6,040 users in < 2 s, on this machine.

    .venv/bin/python benchmarks/bench_foundation_ml1m.py

Reads ../shared/data/ml-1m.seq.tsv.xz (or $SEQREC_DATA_DIR); writes
docs/results/foundation_ml1m.{json,md}. Times are the best of 3 repeats without the parse cache (the first read
is reported too); the evaluation is timed for Pop and PureSVD-N, scoring included.
"""

from __future__ import annotations

import argparse
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "docs" / "results"


def parser() -> argparse.ArgumentParser:
    return argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )


if __name__ == "__main__":
    parser().parse_args()  # --help (and a wrong argument) before the heavy imports below

import json
import os
import time

from seqrec.data.preprocess import PreprocessConfig, preprocess
from seqrec.data.sources import load
from seqrec.data.splits import leave_last_out
from seqrec.evaluation import evaluate
from seqrec.evaluation.results import base_record, hardware_line
from seqrec.registry import get_model


def timed(fn):
    t0 = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - t0


def prepare():
    times = {}
    inter, times["load"] = timed(lambda: load("ml-1m", cache=False))  # no parse cache: honest
    prepared, times["preprocess"] = timed(
        lambda: preprocess(inter, PreprocessConfig(filter="k_core", min_item=5))
    )
    seqs, times["sequences"] = timed(prepared.sequences)
    split, times["split"] = timed(lambda: leave_last_out(seqs))
    times["total"] = sum(times.values())
    return prepared, split, times


def main() -> None:
    runs = [prepare() for _ in range(3)]
    prepared, split, _ = runs[0]
    cold = runs[0][2]
    best = min((r[2] for r in runs), key=lambda t: t["total"])
    counts = {
        "users": prepared.n_users,
        "items": prepared.n_items,
        "interactions": len(prepared.interactions),
    }
    evals = {}
    for name, params in (("pop", {}), ("puresvd", {})):
        config_cls, model_cls = get_model(name)
        model = model_cls(config_cls(**params)).fit(split.train, split.valid)
        best_t, result = None, None
        for _ in range(3):
            result = evaluate(model, split.test, seen_filter="history")
            best_t = result.seconds if best_t is None else min(best_t, result.seconds)
        evals[name] = {
            "seconds": best_t,
            "targets": result.n_targets,
            "NDCG@10": result.metrics["NDCG@10"],
            "HR@10": result.metrics["HR@10"],
        }
    record = base_record(
        benchmark="foundation_ml1m",
        dataset="ml-1m (../shared/data/ml-1m.seq.tsv.xz), iterative 5-core",
        dataset_fingerprint=prepared.fingerprint(),
        protocol="leave-last-out",
        ranking="full",
        seen_filter="history",
        counts=counts,
        published_counts={"users": 6040, "items": 3416, "interactions": 999611},
        prepare_seconds_best_of_3=best,
        prepare_seconds_cold=cold,
        evaluation=evals,
        targets={"prepare_total_s": 3.0, "evaluate_s": 2.0},
        seed=0,
        load_average_1m=os.getloadavg()[0],  # other work on the machine inflates wall times
    )
    lines = [
        "# Foundation benchmark: ML-1M data path and full-ranking evaluation",
        "",
        f"Command: `{record['command']}`  ",
        f"Hardware: {hardware_line(record['hardware'])}  ",
        f"Data: {record['dataset']}, fingerprint `{record['dataset_fingerprint']}`  ",
        f"Load average during the run: {record['load_average_1m']:.1f} on {os.cpu_count()} cores",
        "",
        "| users | items | interactions | published |",
        "|---:|---:|---:|---|",
        f"| {counts['users']:,} | {counts['items']:,} | {counts['interactions']:,} | 6,040 / 3,416 / 999,611 |",
        "",
        "| stage | cold (s) | best of 3 (s) |",
        "|---|---:|---:|",
        *[f"| {k} | {cold[k]:.3f} | {best[k]:.3f} |" for k in best],
        "",
        "Full-ranking evaluation of every test user (seen items filtered, scoring included, best of 3):",
        "",
        "| model | targets | seconds | HR@10 | NDCG@10 |",
        "|---|---:|---:|---:|---:|",
        *[
            f"| {m} | {e['targets']:,} | {e['seconds']:.3f} | {e['HR@10']:.4f} | {e['NDCG@10']:.4f} |"
            for m, e in evals.items()
        ],
        "",
    ]
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "foundation_ml1m.json").write_text(json.dumps(record, indent=2, default=str) + "\n")
    (OUT / "foundation_ml1m.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
