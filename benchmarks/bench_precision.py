"""Training step time in bfloat16 against float32 at ML-1M shapes (``precision = "bf16"``).

The three ML-1M table recipes (``lrurec`` table: SASRec and LRURec; ``hstu`` table: HSTU; d 64,
max_len 200, full cross-entropy, batch 128) train one epoch over the first ``--users`` users of
``ml-1m-sasrec`` (their most recent 200 transitions: ``--users / 128`` full-length steps, the
shape of every ML-1M step), once per precision, alternating, ``--rounds`` times. Reported: the
median seconds per step of each precision, and the median over rounds of the per-round ratio
(both measured in the same process, back to back, so the machine's load hits both alike).
Accuracy is not measured here: the ``precision`` reproduction table compares the two on real
training runs.

Usage: ``python benchmarks/bench_precision.py [--users 640] [--rounds 3] [--threads 1]``;
writes ``docs/results/precision.{json,md}``. Needs ``ml-1m-sasrec`` (the shared data).
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--users", type=int, default=640)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=str(ROOT / "docs" / "results" / "precision"))
    return p


if __name__ == "__main__":
    parser().parse_args()  # --help (and a wrong argument) before the heavy imports below

import dataclasses
import json
import os
import platform
import statistics
import sys
import time

import numpy as np
import torch

from seqrec.models.torch_recommender import _cpu_has_native_bf16
from seqrec.registry import get_model
from seqrec_lab import load_table
from seqrec_lab.runner import prepared_data

RECIPES = (("lrurec", "sasrec-ml1m"), ("lrurec", "lrurec-ml1m"), ("hstu", "hstu-ml1m"))


def seconds_per_step(spec, train, precision: str, threads: int) -> float:
    exp = spec.experiment
    cfg = dataclasses.replace(
        exp.model_config(),
        precision=precision,
        train_windows="last",
        epochs=1,
        patience=0,
        num_threads=threads,
    )
    _, cls = get_model(exp.model)
    model = cls(cfg)
    steps = -(-len(train) // cfg.batch_size)
    t0 = time.perf_counter()
    model.fit(train, None, progress=False)
    return (time.perf_counter() - t0) / steps


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    torch.set_num_threads(args.threads)
    t_start = time.time()
    rows = []
    for table, run_id in RECIPES:
        spec = load_table(table).select(run_ids={run_id})[0]
        split = prepared_data(spec).split
        train = split.train.select(np.arange(args.users))
        times = {"fp32": [], "bf16": []}
        for _ in range(args.rounds):
            for precision in times:
                times[precision].append(seconds_per_step(spec, train, precision, args.threads))
        ratios = [a / b for a, b in zip(times["fp32"], times["bf16"], strict=True)]
        row = {
            "model": spec.experiment.model,
            "recipe": f"{table}:{run_id}",
            "fp32_s_per_step": statistics.median(times["fp32"]),
            "bf16_s_per_step": statistics.median(times["bf16"]),
            "speedup": statistics.median(ratios),
            "rounds": times,
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    record = {
        "benchmark": "precision_step_time",
        "command": "python " + " ".join([os.path.relpath(__file__, ROOT)] + (argv or sys.argv[1:])),
        "data": f"ml-1m-sasrec, first {args.users} users, last 200 transitions each, batch 128",
        "hardware": f"{platform.platform()}; {platform.processor() or platform.machine()}; "
        f"cpu_count={os.cpu_count()}; torch threads={args.threads}; "
        f"native bf16: {_cpu_has_native_bf16()}",
        "versions": {"python": platform.python_version(), "torch": torch.__version__},
        "seed": 0,
        "rows": rows,
        "wall_seconds": time.time() - t_start,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
    lines = [
        "# bfloat16 against float32 training: step time at ML-1M shapes",
        "",
        f"Command: `{record['command']}`  ",
        f"Data: {record['data']}  ",
        f"Hardware: {record['hardware']}  ",
        f"Versions: {record['versions']}; measured {record['time']}; seed 0. The machine was "
        "shared with other trainings: absolute times are noisy, the ratio is the median of "
        "per-round ratios of back-to-back runs.",
        "",
        "| model | recipe | fp32 s/step | bf16 s/step | speed-up |",
        "|---|---|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | `{r['recipe']}` | {r['fp32_s_per_step']:.3f} | "
            f"{r['bf16_s_per_step']:.3f} | {r['speedup']:.2f}x |"
        )
    lines += [
        "",
        "Accuracy of the two precisions on real training runs: `seqrec reproduce precision` "
        "(`docs/reproduce/precision.md`).",
    ]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
