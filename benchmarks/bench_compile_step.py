"""Training-step time of SASRec and LRURec, eager against ``torch.compile`` (inductor, CPU).

The LRURec / SASRec step ratio (``bench_hstu_speed.py``, B 128, L 200, d 64, full CE, one
thread) is left with a gap that profiles put in many small elementwise passes; compiled kernels
that fuse them are the lever the speed study names. This measures the one such compiler PyTorch
ships: each model's encoder ``forward`` wrapped in ``torch.compile`` (the loss, backward and
AdamW as in the trainer), against the same model eager. LRURec compiles its plain path (its
fused CPU nodes are ``autograd.Function``s with NumPy mask draws, which the compiler cannot
trace): the scan in complex arithmetic, for which inductor generates no code.

Each (model, mode) runs in this process after a warm-up (the first compiled steps include
compilation, reported apart); steps are interleaved across the four variants in rounds; the
median process CPU time per step is reported with its ratio to eager SASRec. Needs a C++
compiler for inductor; without one the compiled rows are reported as failed.

    .venv/bin/python benchmarks/bench_compile_step.py

Writes docs/results/compile_step.{json,md} (``--out-stem``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results"


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=8, help="interleaved steps per variant")
    ap.add_argument("--items", type=int, default=3416, help="catalogue size (ML-1M: 3,416)")
    ap.add_argument("--max-len", type=int, default=200)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--out-stem", default="compile_step")
    return ap


if __name__ == "__main__":
    parser().parse_args()  # --help before the heavy imports

import os  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_hstu_speed import build, step_fn, synthetic_train  # noqa: E402

from seqrec.evaluation.results import base_record, hardware_line, write_report  # noqa: E402
from seqrec.models import lrurec  # noqa: E402

VARIANTS = (("sasrec", "eager"), ("sasrec", "compile"), ("lrurec", "eager"), ("lrurec", "compile"))


class _PlainLRU:
    """While active, LRURec runs its plain modules (the fused CPU nodes off): what the compiler
    can trace."""

    def __init__(self, on: bool) -> None:
        self.on = on

    def __enter__(self):
        self.saved = (lrurec._fuse, lrurec._real_rows)
        if self.on:
            lrurec._fuse = lambda x, dropout: False
            lrurec._real_rows = lambda x, mask, training: None

    def __exit__(self, *exc):
        lrurec._fuse, lrurec._real_rows = self.saved


def make_step(kind: str, mode: str, args, train):
    model = build(kind, args, "ce")
    model._remember_catalogue(train)
    torch.manual_seed(0)
    model.encoder = model.build_encoder(train.n_items)
    model.encoder.train()
    if mode == "compile":
        model.encoder.forward = torch.compile(model.encoder.forward)
    return step_fn(model, train, np.arange(len(train)), np.random.default_rng(0))


def main() -> None:
    args = parser().parse_args()
    args.blocks, args.heads = 2, 1
    torch.set_num_threads(1)
    train = synthetic_train(512, args.items, args.max_len, seed=0)
    steps, warmup, failed = {}, {}, {}
    for kind, mode in VARIANTS:
        name = f"{kind}/{mode}"
        plain = kind == "lrurec" and mode == "compile"
        try:
            with _PlainLRU(plain):
                step = make_step(kind, mode, args, train)
                t0 = time.perf_counter()
                step()
                step()
            warmup[name] = time.perf_counter() - t0
            steps[name] = (step, plain)
        except Exception as exc:  # noqa: BLE001  (no C++ compiler, unsupported op: report it)
            failed[name] = f"{type(exc).__name__}: {str(exc)[:200]}"
        print(name, "warm-up s", warmup.get(name), failed.get(name, ""), flush=True)
    cpu: dict[str, list[float]] = {name: [] for name in steps}
    loads = [os.getloadavg()[0]]
    for _ in range(args.rounds):
        for name, (step, plain) in steps.items():
            with _PlainLRU(plain):
                c0 = time.process_time()
                step()
                cpu[name].append(time.process_time() - c0)
        loads.append(os.getloadavg()[0])
    median = {name: statistics.median(v) for name, v in cpu.items()}
    base = median.get("sasrec/eager")
    rows = [
        {
            "variant": name,
            "median_step_cpu_s": median.get(name),
            "ratio_to_sasrec_eager": median[name] / base if base and name in median else None,
            "warmup_s": warmup.get(name),
            "failed": failed.get(name),
            "steps_cpu_s": cpu.get(name),
        }
        for name in (f"{k}/{m}" for k, m in VARIANTS)
    ]
    record = base_record(
        benchmark="compile_step",
        protocol=f"one thread; B {args.batch_size}, L {args.max_len}, d {args.dim}, 2 blocks, "
        f"full CE over {args.items} items, synthetic full windows; median process CPU s of "
        f"{args.rounds} interleaved steps after 2 warm-up steps",
        torch_version=torch.__version__,
        rows=rows,
        load_range=f"{min(loads):.1f}-{max(loads):.1f}",
    )
    lines = [
        "# Training step, eager against torch.compile (CPU)\n",
        f"Command: `{record['command']}`  ",
        f"Protocol: {record['protocol']}  ",
        f"Hardware: {hardware_line(record['hardware'])}; torch {torch.__version__}  ",
        f"Measured {record['created']}; 1-minute load average {record['load_range']}\n",
        "LRURec compiled runs its plain modules (the fused CPU nodes cannot be traced); its "
        "eager row is the fused path the trainer uses.\n",
        "| variant | median step CPU s | ratio to eager SASRec | warm-up s (2 steps) | note |",
        "|---|---:|---:|---:|---|",
    ]
    for r in rows:
        med = "–" if r["median_step_cpu_s"] is None else f"{r['median_step_cpu_s']:.3f}"
        ratio = "–" if r["ratio_to_sasrec_eager"] is None else f"{r['ratio_to_sasrec_eager']:.2f}"
        warm = "–" if r["warmup_s"] is None else f"{r['warmup_s']:.1f}"
        lines.append(f"| {r['variant']} | {med} | {ratio} | {warm} | {r['failed'] or ''} |")
    print(write_report(OUT, args.out_stem, record, "\n".join(lines) + "\n"))


if __name__ == "__main__":
    main()
