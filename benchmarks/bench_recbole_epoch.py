"""What one epoch of RecBole's SASRec costs on this CPU, measured (issue 19: is the peers
table's RecBole ML-1M row feasible without a GPU?).

The peers table trains RecBole's SASRec with its own trainer on the harness's split, written in
RecBole's session format: every transition of every training history is a sequence of its own
(padded to ``max_len``), which is what RecBole's sequential augmentation does
(``benchmarks/peers/peer_recbole.py``). This script builds exactly that dataset and model (the
worker's own code, ``time_batches`` mode), times RecBole's training step (``calculate_loss``,
backward, Adam step) on the first batches of an epoch, and multiplies by the batches per epoch.
Nothing is trained to the end and no accuracy is claimed.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_recbole_epoch.py --dataset ml-1m-sasrec \
        --max-len 200 --batches 4

The RecBole interpreter is the peers table's (``runs/peers/recbole``, installed on first use).
Writes docs/results/recbole_epoch_<dataset>.{json,md}. The machine may be shared: the load
average during the probe is recorded, and the figure is the median batch.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
from pathlib import Path

from seqrec.data.preprocess import PreprocessConfig, preprocess
from seqrec.data.sources import load
from seqrec.data.splits import leave_last_out
from seqrec.evaluation.results import base_record, hardware_line
from seqrec.reproduce.peers import ensure_venv, export_split, worker_dir

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="ml-1m-sasrec")
    ap.add_argument("--max-len", type=int, default=200)
    ap.add_argument("--batches", type=int, default=4, help="timed batches after one warm-up")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--work", default=str(ROOT / "runs" / "bench-recbole-epoch"))
    args = ap.parse_args()

    # the peers table's preprocessing and split (configs/reproduce/peers.toml [defaults])
    prepared = preprocess(load(args.dataset), PreprocessConfig(filter="k_core", min_item=5))
    split = leave_last_out(prepared.sequences())
    work = Path(args.work) / args.dataset
    export_split(split, work)
    python = ensure_venv("recbole", ROOT / "runs" / "peers")
    worker_args = {"library": "recbole", "dim": 64, "n_blocks": 2, "n_heads": 1,
                   "max_len": args.max_len, "dropout": 0.2, "epochs": 1, "patience": 10, "k": 10,
                   "seed": 0, "num_threads": args.threads, "time_batches": args.batches}
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    subprocess.run([str(python), str(worker_dir() / "peer_recbole.py"), str(work), str(work),
                    json.dumps(worker_args)], check=True, cwd=work)  # RecBole logs into the cwd
    wall = time.perf_counter() - t0
    probe = json.loads((work / "probe.json").read_text())
    per_batch = statistics.median(probe["batch_seconds"])
    epoch_hours = per_batch * probe["batches_per_epoch"] / 3600
    record = base_record(
        benchmark="recbole_epoch", dataset=args.dataset, max_len=args.max_len,
        torch_threads=args.threads, worker_args=worker_args, probe=probe,
        median_batch_seconds=per_batch, epoch_hours=epoch_hours, probe_wall_seconds=wall,
        load_average={"before": load_before, "after": os.getloadavg()[0]},
    )
    stem = f"recbole_epoch_{args.dataset}"
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{stem}.json").write_text(json.dumps(record, indent=2) + "\n")
    md = (f"# RecBole SASRec: one training epoch on {args.dataset}, measured\n\n"
          f"Command: `{record['command']}`  \n"
          f"Data: {args.dataset}, 5-core items, leave-last-out (the peers table's split), every "
          f"training transition a sequence of at most {args.max_len} (RecBole's augmentation); "
          f"RecBole {record['probe'].get('version', '1.2.1')} SASRec as the peers worker builds it "
          f"(CE, d 64, 2 blocks, 1 head, dropout 0.2, its batch {probe['batch_size']}), seed 0.  \n"
          f"Hardware: {hardware_line(record['hardware'])}; torch threads {args.threads}; 1-minute "
          f"load average {load_before:.1f} before, {record['load_average']['after']:.1f} after "
          f"(the machine was shared with other trainings).  \n"
          f"Measured {record['created']}.\n\n"
          "| sequences per epoch | batches per epoch | timed batches | median s per batch "
          "| warm-up batch s | one epoch (hours) | peak RSS MB |\n|---:|---:|---:|---:|---:|---:|---:|\n"
          f"| {probe['sequences_per_epoch']:,} | {probe['batches_per_epoch']:,} | "
          f"{len(probe['batch_seconds'])} | {per_batch:.1f} | {probe['warmup_seconds']:.1f} | "
          f"{epoch_hours:.2f} | {probe['peak_rss_mb']:.0f} |\n\n"
          "One epoch = median batch seconds x batches per epoch (training steps only; RecBole's "
          "validation after each epoch comes on top). RecBole checkpoints only between epochs.\n")
    (OUT / f"{stem}.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
