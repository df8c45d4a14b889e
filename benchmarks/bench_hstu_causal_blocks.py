"""HSTU's attention in causal blocks of queries against the whole square: training step and
validation time, the same metrics.

HSTU has no softmax, so its attention is a product, a bias, a SiLU and a mask over every
(query, key) pair of the ``[L, L]`` square, although the causal mask zeroes the half above the
diagonal. ``seqrec.models.hstu.CAUSAL_BLOCK`` cuts the queries into blocks, each against the
keys up to its end; 0 computes the whole square (the plain form). For each block size, on a
reproduction run's data and batch (untrained weights, seed 0, one thread): the median of
``--steps`` interleaved training steps (forward, loss, backward, AdamW), process CPU ms, and
one validation of all validation users each, process CPU s, with its NDCG@10.

    .venv/bin/python benchmarks/bench_hstu_causal_blocks.py

Writes docs/results/hstu_causal_blocks.{json,md} (``--out-stem``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results"


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", default="hstu:hstu-ml1m", help="table:run")
    ap.add_argument("--blocks", default="0,50,64,100", help="block sizes (0: the whole square)")
    ap.add_argument("--steps", type=int, default=9, help="interleaved steps per block size")
    ap.add_argument("--out-stem", default="hstu_causal_blocks")
    return ap


if __name__ == "__main__":
    parser().parse_args()  # --help before the heavy imports

import os  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))
from _run_steps import run_steps  # noqa: E402

from seqrec.evaluation.results import base_record, hardware_line, write_report  # noqa: E402
from seqrec.experiment import evaluate_model  # noqa: E402
from seqrec.models import hstu  # noqa: E402


def main() -> None:
    args = parser().parse_args()
    torch.set_num_threads(1)
    blocks = [int(b) for b in args.blocks.split(",")]
    run = run_steps(ROOT, args.run, args.steps + 1)
    exp, split, model, batches, step = run.experiment, run.split, run.model, run.batches, run.step
    batch_size = run.batch_size

    default = hstu.CAUSAL_BLOCK
    loads = [os.getloadavg()[0]]
    cpu: dict[int, list[float]] = {b: [] for b in blocks}
    valid: dict[int, dict] = {}
    try:
        step(batches[0])
        for data in batches[1:]:
            for b in blocks:
                hstu.CAUSAL_BLOCK = b
                c = time.process_time()
                step(data)
                cpu[b].append(time.process_time() - c)
        model.encoder.eval()
        for b in blocks:
            hstu.CAUSAL_BLOCK = b
            c = time.process_time()
            metrics = evaluate_model(model, exp, split.valid).metrics
            valid[b] = {"seconds": time.process_time() - c, "NDCG@10": metrics.get("NDCG@10")}
    finally:
        hstu.CAUSAL_BLOCK = default
    loads.append(os.getloadavg()[0])
    base = statistics.median(cpu[0]) if 0 in cpu else None
    rows_out = [
        {
            "block": b,
            "step_ms": statistics.median(cpu[b]) * 1e3,
            "step_ratio": statistics.median(cpu[b]) / base if base else None,
            "valid_s": valid[b]["seconds"],
            "valid_ratio": valid[b]["seconds"] / valid[0]["seconds"] if 0 in valid else None,
            "valid_ndcg10": valid[b]["NDCG@10"],
        }
        for b in blocks
    ]
    record = base_record(
        benchmark="hstu_causal_blocks",
        run=args.run,
        dataset=exp.data.name,
        batch_size=batch_size,
        max_len=model.config.max_len,
        protocol=f"one thread, untrained weights, seed 0; median of {args.steps} interleaved "
        "training steps, one validation of all validation users per block size, process CPU",
        rows=rows_out,
        default_block=default,
        load_range=f"{min(loads):.1f}-{max(loads):.1f}",
    )
    lines = [
        "# HSTU attention: causal blocks against the whole square\n",
        f"Command: `{record['command']}`  ",
        f"Data: `{args.run}` ({exp.data.name}, batch {batch_size}, max_len "
        f"{model.config.max_len})  ",
        f"Protocol: {record['protocol']}  ",
        f"Hardware: {hardware_line(record['hardware'])}  ",
        f"Measured {record['created']}; 1-minute load average {record['load_range']}; the "
        f"default block is {default}\n",
        "| queries per block | step ms | ratio | validation s | ratio | validation NDCG@10 |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows_out:
        name = "whole square" if r["block"] == 0 else str(r["block"])
        lines.append(
            f"| {name} | {r['step_ms']:.1f} | {r['step_ratio']:.2f} | {r['valid_s']:.2f} | "
            f"{r['valid_ratio']:.2f} | {r['valid_ndcg10']:.6f} |"
        )
    print(write_report(OUT, args.out_stem, record, "\n".join(lines) + "\n"))


if __name__ == "__main__":
    main()
