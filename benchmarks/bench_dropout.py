"""Training step time with seqrec's CPU dropout against torch's ``nn.Dropout`` (``bernoulli_``).

``seqrec.models.layers.Dropout`` draws its mask as ``uniform_() >= p``; torch's CPU dropout calls
``bernoulli_``, which took 18-20% of a SASRec training step in ``torch.profiler``. Two
measurements, both in this process, alternating, ``--rounds`` times:

* the op: forward + backward of dropout (p = 0.5) on the activation shapes of the ML-1M
  recipes (128 x 200 x 64) and of the Amazon tables at D = 128 (256 x 50 x 128);
* whole training steps of table recipes (their data, their config; one epoch over the first
  ``--users`` users, last windows), once with seqrec's dropout and once with ``Dropout.forward``
  swapped for ``nn.Dropout.forward`` (the same modules, the same batches and initialization).

A warm-up fit of each kind comes first, uncounted, and the order alternates between rounds.
Reported: medians of CPU seconds (the process's, robust on a shared machine with one torch
thread) and wall seconds per step, and the median over rounds of the per-round CPU ratio.
The two dropouts draw different masks, so losses differ step by step; accuracy is unaffected in
distribution (``tests/models/test_dropout.py`` checks the keep rate, scaling and gradient).

Usage: ``python benchmarks/bench_dropout.py [--users 384] [--rounds 3] [--threads 1]``; writes
``docs/results/dropout_speed.{json,md}``. The step rows need the shared data (ML-1M, Beauty).
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--users", type=int, default=384, help="training users per epoch (ML-1M; x2 on Beauty)"
    )
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=str(ROOT / "docs" / "results" / "dropout_speed"))
    return p


if __name__ == "__main__":
    parser().parse_args()  # --help (and a wrong argument) before the heavy imports below

import contextlib
import dataclasses
import json
import os
import platform
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from seqrec.models import layers
from seqrec.registry import get_model
from seqrec_lab import load_table
from seqrec_lab.runner import prepared_data

RECIPES = (
    ("lrurec", "sasrec-ml1m"),
    ("lrurec", "lrurec-ml1m"),
    ("hstu", "hstu-ml1m"),
    ("lsan", "sasrec-d128-beauty"),
    ("lsan", "lsan-beauty"),
)
SHAPES = ((128, 200, 64), (256, 50, 128))
KINDS = ("torch", "seqrec")


@contextlib.contextmanager
def dropout_kind(kind: str):
    """``torch``: every ``layers.Dropout`` runs ``nn.Dropout.forward`` (bernoulli_)."""
    original = layers.Dropout.forward
    if kind == "torch":
        layers.Dropout.forward = nn.Dropout.forward
    try:
        yield
    finally:
        layers.Dropout.forward = original


def op_seconds(shape: tuple[int, ...], kind: str, repeats: int = 20) -> float:
    x = torch.randn(*shape, requires_grad=True)
    fn = (
        (lambda t: F.dropout(t, 0.5, True))
        if kind == "torch"
        else (lambda t: layers.cpu_dropout(t, 0.5))
    )
    fn(x).sum().backward()
    t0 = time.process_time()
    for _ in range(repeats):
        fn(x).sum().backward()
    return (time.process_time() - t0) / repeats


def step_seconds(spec, train, kind: str, threads: int) -> tuple[float, float]:
    cfg = dataclasses.replace(
        spec.experiment.model_config(),
        train_windows="last",
        epochs=1,
        patience=0,
        num_threads=threads,
    )
    _, cls = get_model(spec.experiment.model)
    steps = -(-len(train) // cfg.batch_size)
    with dropout_kind(kind):
        c0, w0 = time.process_time(), time.perf_counter()
        cls(cfg).fit(train, None, progress=False)
        return (time.process_time() - c0) / steps, (time.perf_counter() - w0) / steps


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    torch.set_num_threads(args.threads)
    t_start = time.time()
    ops = []
    for shape in SHAPES:
        times = {k: [] for k in KINDS}
        for _ in range(args.rounds):
            for k in KINDS:
                times[k].append(op_seconds(shape, k))
        ops.append(
            {
                "shape": list(shape),
                **{f"{k}_cpu_s": statistics.median(v) for k, v in times.items()},
                "speedup": statistics.median(
                    a / b for a, b in zip(times["torch"], times["seqrec"], strict=True)
                ),
            }
        )
        print(json.dumps(ops[-1]), flush=True)
    steps = []
    for table, run_id in RECIPES:
        spec = load_table(table).select(run_ids={run_id})[0]
        train = prepared_data(spec).split.train
        n = args.users * (2 if spec.experiment.model_config().batch_size > 128 else 1)
        train = train.select(np.arange(min(n, len(train))))
        cpu = {k: [] for k in KINDS}
        wall = {k: [] for k in KINDS}
        for k in KINDS:  # warm-up, not counted: the first fit of a process pays one-off costs
            step_seconds(spec, train, k, args.threads)
        for r in range(args.rounds):
            for k in KINDS if r % 2 == 0 else KINDS[::-1]:  # alternate who goes first
                c, w = step_seconds(spec, train, k, args.threads)
                cpu[k].append(c)
                wall[k].append(w)
        row = {
            "model": spec.experiment.model,
            "recipe": f"{table}:{run_id}",
            "users": len(train),
            **{f"{k}_cpu_s_per_step": statistics.median(cpu[k]) for k in KINDS},
            **{f"{k}_wall_s_per_step": statistics.median(wall[k]) for k in KINDS},
            "speedup_cpu": statistics.median(
                a / b for a, b in zip(cpu["torch"], cpu["seqrec"], strict=True)
            ),
            "rounds": {"cpu": cpu, "wall": wall},
        }
        steps.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "rounds"}), flush=True)
    record = {
        "benchmark": "dropout_step_time",
        "command": "python " + " ".join([os.path.relpath(__file__, ROOT)] + (argv or sys.argv[1:])),
        "data": f"ML-1M recipes: the first {args.users} users of ml-1m-sasrec; Beauty recipes: the "
        f"first {2 * args.users} users of amazon-beauty-s3rec; last windows, one epoch",
        "hardware": f"{platform.platform()}; {platform.processor() or platform.machine()}; "
        f"cpu_count={os.cpu_count()}; torch threads={args.threads}; "
        f"load average at the end {os.getloadavg()}",
        "versions": {"python": platform.python_version(), "torch": torch.__version__},
        "seed": 0,
        "ops": ops,
        "steps": steps,
        "wall_seconds": time.time() - t_start,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
    lines = [
        "# Dropout on CPU: seqrec's mask (`uniform_ >= p`) against torch's (`bernoulli_`)",
        "",
        f"Command: `{record['command']}`  ",
        f"Data: {record['data']}  ",
        f"Hardware: {record['hardware']}  ",
        f"Versions: {record['versions']}; measured {record['time']}; seed 0. CPU seconds of "
        "this process (one torch thread), so other work on the machine does not count; the "
        "speed-up is the median of per-round ratios of back-to-back runs.",
        "",
        "## The op (forward + backward, p = 0.5)",
        "",
        "| shape | torch CPU ms | seqrec CPU ms | speed-up |",
        "|---|---:|---:|---:|",
    ]
    for r in ops:
        lines.append(
            f"| {' x '.join(map(str, r['shape']))} | {1e3 * r['torch_cpu_s']:.1f} | "
            f"{1e3 * r['seqrec_cpu_s']:.1f} | {r['speedup']:.2f}x |"
        )
    lines += [
        "",
        "## Training steps of table recipes",
        "",
        "| model | recipe | users | torch CPU s/step | seqrec CPU s/step | speed-up (CPU) | "
        "torch wall s/step | seqrec wall s/step |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in steps:
        lines.append(
            f"| {r['model']} | `{r['recipe']}` | {r['users']} | {r['torch_cpu_s_per_step']:.3f} | "
            f"{r['seqrec_cpu_s_per_step']:.3f} | {r['speedup_cpu']:.2f}x | "
            f"{r['torch_wall_s_per_step']:.3f} | {r['seqrec_wall_s_per_step']:.3f} |"
        )
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
