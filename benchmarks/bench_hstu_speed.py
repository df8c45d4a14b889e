"""Training-step time of HSTU against SASRec at equal d and L, as ratios measured in one run.

One "step" is what the trainer does per batch: ``make_batch`` (inputs, targets, negatives),
``compute_loss`` (encoder forward + loss), ``backward`` and an AdamW update. Models are measured
in interleaved rounds (A B C ... A B C ...) so that load from other processes hits all of them
alike; the median step time of each model is reported with its ratio to SASRec, in wall and
in process CPU seconds (on a shared machine the CPU ratio is the steadier one).

It also records the memory the attention takes: the bytes autograd keeps for the backward pass
(``saved_tensors_hooks``, de-duplicated by storage), and the size of one ``[B, H, L, L]`` float
tensor.

    python benchmarks/bench_hstu_speed.py                 # ML-1M-sized: I=3706, L=200, d=50
    python benchmarks/bench_hstu_speed.py --rounds 3 --out-stem speed_quick
    python benchmarks/bench_hstu_speed.py --models sasrec,lrurec --losses ce --dim 64 \
        --items 3416 --out-stem lrurec_step_ml1m      # LRURec vs SASRec at the ML-1M shape

``lrurec`` is measured like the others (its gradient clipping is not part of the step).
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--items", type=int, default=3706)
    p.add_argument("--max-len", type=int, default=200)
    p.add_argument("--dim", type=int, default=50)
    p.add_argument("--blocks", type=int, default=2)
    p.add_argument("--heads", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--losses", default="sampled_softmax,ce")
    p.add_argument("--models", default="sasrec,hstu_norab,hstu_pos,hstu_pt,hstu_pt_shared")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out-stem", default="hstu_speed")
    return p


if __name__ == "__main__":
    parser().parse_args()  # --help (and a wrong argument) before the heavy imports below

import json
import os
import statistics
import time

import numpy as np
import torch

from seqrec.data.sequences import Sequences
from seqrec.evaluation.results import base_record
from seqrec.models.hstu import HSTU, HSTUConfig
from seqrec.models.lrurec import LRURec, LRURecConfig
from seqrec.models.neural_config import settings
from seqrec.models.sasrec import SASRec, SASRecConfig


def synthetic_train(n_users: int, n_items: int, length: int, seed: int) -> Sequences:
    """Random histories of ``length + 1`` items with increasing timestamps (hours apart)."""
    rng = np.random.default_rng(seed)
    rows = [rng.integers(1, n_items + 1, size=length + 1) for _ in range(n_users)]
    times = [
        1_000_000_000 + np.cumsum(rng.integers(1, 86_400 * 3, size=length + 1))
        for _ in range(n_users)
    ]
    return Sequences.from_lists(rows, n_items=n_items, timestamps=times)


def build(kind: str, args, loss: str):
    common = dict(
        max_len=args.max_len,
        dim=args.dim,
        n_blocks=args.blocks,
        n_heads=args.heads,
        dropout=0.2,
        loss=loss,
        n_negatives=128,
        batch_size=args.batch_size,
        seed=0,
    )
    if kind == "sasrec":
        return SASRec(settings(SASRecConfig, **common))
    if kind == "lrurec":  # LRURec has no heads
        common.pop("n_heads")
        return LRURec(settings(LRURecConfig, **common))
    extra = {
        "hstu_pos": {"rab_time": False},
        "hstu_pt": {},
        "hstu_pt_shared": {"rab_shared": True},
        "hstu_norab": {"rab": False},
    }[kind]
    if loss == "sampled_softmax":
        extra = {**extra, "l2_norm": True, "temperature": 0.05}
    return HSTU(settings(HSTUConfig, **common, **extra))


class _Saved:
    """Bytes of distinct storages autograd saves for backward."""

    def __init__(self):
        self.ptrs: dict[int, int] = {}

    def pack(self, t):
        try:
            s = t.untyped_storage()
            self.ptrs[s.data_ptr()] = s.nbytes()
        except Exception:  # noqa: BLE001  (sparse or odd tensors: skip)
            pass
        return t

    @property
    def mib(self) -> float:
        return sum(self.ptrs.values()) / 2**20


def step_fn(model, train, rows_all, rng):
    enc = model.encoder
    opt = torch.optim.AdamW(enc.parameters(), lr=1e-3)

    def step(saved: _Saved | None = None):
        rows = rng.choice(rows_all, size=model.train_config.batch_size, replace=False)
        data = model.make_batch(train, rows, rng)
        if saved is None:
            loss = model.compute_loss(data)
        else:
            with torch.autograd.graph.saved_tensors_hooks(saved.pack, lambda t: t):
                loss = model.compute_loss(data)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def main() -> None:
    args = parser().parse_args()
    torch.set_num_threads(args.threads)
    train = synthetic_train(512, args.items, args.max_len, seed=0)
    rows_all = np.arange(len(train))
    kinds = args.models.split(",")
    results: dict[str, dict] = {}
    t_start = time.perf_counter()
    for loss in args.losses.split(","):
        steps, times, mem = {}, {k: [] for k in kinds}, {}
        cpu = {k: [] for k in kinds}
        for kind in kinds:
            model = build(kind, args, loss)
            model._remember_catalogue(train)
            torch.manual_seed(0)
            model.encoder = model.build_encoder(train.n_items)
            model.encoder.train()
            if loss in ("bce", "gbce", "sampled_softmax"):
                from seqrec.training.negatives import NegativeSampler

                model._sampler = NegativeSampler(train)
            steps[kind] = step_fn(model, train, rows_all, np.random.default_rng(0))
            saved = _Saved()
            steps[kind](saved)  # warm-up, and the saved-for-backward bytes
            mem[kind] = saved.mib
        for _ in range(args.rounds):
            for kind in kinds:
                t0, c0 = time.perf_counter(), time.process_time()
                steps[kind]()
                times[kind].append(time.perf_counter() - t0)
                cpu[kind].append(time.process_time() - c0)
        base = statistics.median(times["sasrec"]) if "sasrec" in times else None
        base_cpu = statistics.median(cpu["sasrec"]) if "sasrec" in cpu else None
        results[loss] = {
            k: {
                "median_step_s": statistics.median(v),
                "min_step_s": min(v),
                "ratio_to_sasrec": None if base is None else statistics.median(v) / base,
                "median_step_cpu_s": statistics.median(cpu[k]),
                "cpu_ratio_to_sasrec": (
                    None if base_cpu is None else statistics.median(cpu[k]) / base_cpu
                ),
                "saved_for_backward_mib": mem[k],
                "steps": v,
            }
            for k, v in times.items()
        }
    h = args.heads
    attn_mib = args.batch_size * h * args.max_len**2 * 4 / 2**20
    record = base_record(
        benchmark="hstu_speed",
        models=kinds,
        loss_results=results,
        setting={
            "n_items": args.items,
            "max_len": args.max_len,
            "dim": args.dim,
            "n_blocks": args.blocks,
            "n_heads": args.heads,
            "batch_size": args.batch_size,
            "rounds": args.rounds,
            "threads": args.threads,
            "data": "synthetic random histories (full windows, timestamps hours apart)",
        },
        attention_tensor_mib=attn_mib,
        load_average=os.getloadavg(),
        wall_seconds=time.perf_counter() - t_start,
        notes="hstu_norab: no rab; hstu_pos: position-only rab; hstu_pt: rab^{p,t} one per "
        "layer (paper); hstu_pt_shared: one rab^{p,t} for all layers. sampled_softmax "
        "rows use 128 shared negatives (HSTU: l2_norm + temperature 0.05).",
    )
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{args.out_stem}.json").write_text(json.dumps(record, indent=2) + "\n")
    lines = [
        f"# Training-step time: {', '.join(kinds)}\n",
        f"`{record['command']}`  \n{record['hardware']}  \nload average at end: "
        f"{record['load_average']}  \nB={args.batch_size}, L={args.max_len}, d={args.dim}, "
        f"{args.blocks} blocks, {h} head(s), I={args.items}; one [B,H,L,L] float tensor = "
        f"{attn_mib:.1f} MiB\n",
        "| loss | model | median step (s) | ratio to SASRec | median step CPU (s) | "
        "CPU ratio to SASRec | saved for backward (MiB) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for loss, res in results.items():
        for k, r in res.items():
            ratio = "" if r["ratio_to_sasrec"] is None else f"{r['ratio_to_sasrec']:.2f}"
            cratio = "" if r["cpu_ratio_to_sasrec"] is None else f"{r['cpu_ratio_to_sasrec']:.2f}"
            lines.append(
                f"| {loss} | {k} | {r['median_step_s']:.3f} | {ratio} | "
                f"{r['median_step_cpu_s']:.3f} | {cratio} | {r['saved_for_backward_mib']:.0f} |"
            )
    (OUT / f"{args.out_stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
