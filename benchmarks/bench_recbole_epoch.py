"""What one epoch of RecBole's SASRec costs on this CPU, measured (issue 19: is the peers
table's RecBole ML-1M row feasible without a GPU?).

The peers table trains RecBole's SASRec with its own trainer on the harness's split, written in
RecBole's session format: every transition of every training history is a sequence of its own
(padded to ``max_len``), which is what RecBole's sequential augmentation does
(``src/seqrec_lab/workers/peer_recbole.py``). This script builds exactly that dataset and model (the
worker's own code, ``time_batches`` mode), times RecBole's training step (``calculate_loss``,
backward, Adam step) on the first batches of an epoch, and multiplies by the batches per epoch.
Nothing is trained to the end and no accuracy is claimed.

    .venv/bin/python benchmarks/bench_recbole_epoch.py --run recbole-ml1m --batches 3

The RecBole interpreter is the peers table's (``runs/peers/recbole``, installed on first use).
Writes docs/results/recbole_epoch_<dataset>.{json,md} (the row's dataset). The machine may be shared: the load
average during the probe is recorded, and the figure is the median batch.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
from pathlib import Path

from seqrec.evaluation.results import base_record, hardware_line
from seqrec_lab import load_table, peers, runner

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", default="recbole-ml1m", help="a RecBole row of configs/reproduce/peers.toml")
    ap.add_argument("--batches", type=int, default=4, help="timed batches after one warm-up")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--work", default=str(ROOT / "runs" / "bench-recbole-epoch"))
    args = ap.parse_args()

    # the row's own data, split and model config, launched as the harness launches it
    (spec,) = load_table(ROOT / "configs" / "reproduce" / "peers.toml").select(run_ids={args.run}, seeds={0})
    exp = spec.experiment
    cfg = dataclasses.replace(peers.peer_config(exp.model, exp.model_params, exp.seed),
                              num_threads=args.threads)
    if cfg.library != "recbole":
        raise SystemExit(f"{args.run} is not a RecBole row")
    work = (Path(args.work) / args.run).resolve()
    peers.export_split(runner.prepared_data(spec).split, work)
    python = peers.ensure_venv("recbole", ROOT / "runs" / "peers")
    load_before = os.getloadavg()[0]
    probe = peers.run_worker(cfg, python, work, None, extra={"time_batches": args.batches})
    per_batch = statistics.median(probe["batch_seconds"])
    epoch_hours = per_batch * probe["batches_per_epoch"] / 3600
    record = base_record(
        benchmark="recbole_epoch", run=args.run, dataset=spec.dataset, max_len=cfg.max_len,
        torch_threads=args.threads, peer_config=dataclasses.asdict(cfg), probe=probe,
        median_batch_seconds=per_batch, epoch_hours=epoch_hours, probe_wall_seconds=probe["wall_seconds"],
        load_average={"before": load_before, "after": os.getloadavg()[0]},
    )
    stem = f"recbole_epoch_{spec.dataset}"
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{stem}.json").write_text(json.dumps(record, indent=2) + "\n")
    md = (f"# RecBole SASRec: one training epoch on {spec.dataset}, measured\n\n"
          f"Command: `{record['command']}`  \n"
          f"Data: {spec.dataset}, the split of the peers row `{args.run}`, every training transition "
          f"a sequence of at most {cfg.max_len} (RecBole's augmentation); RecBole "
          f"{probe['version']} SASRec as the peers worker builds it (CE, d {cfg.dim}, "
          f"{cfg.n_blocks} blocks, {cfg.n_heads} head(s), dropout {cfg.dropout}, its batch "
          f"{probe['batch_size']}), seed {cfg.seed}.  \n"
          f"Hardware: {hardware_line(dict(record['hardware'], torch_threads=None))}; the worker's "
          f"torch threads {args.threads}; 1-minute load average {load_before:.1f} before, "
          f"{record['load_average']['after']:.1f} after (other processes on the machine count "
          f"in these times).  \n"
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
