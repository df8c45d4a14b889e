"""CPU training step time with glibc's mmap and heap trimming turned off, against its defaults.

A candidate speed-up, measured and NOT adopted (see ``docs/results/malloc.md``): glibc serves
blocks above its mmap threshold (at most 32 MB) with a fresh mmap, so a step's large tensors
are page-faulted in again every step (BERT4Rec at ML-1M shapes: ~100,000 minor faults and a
seventh of the step in the kernel). ``MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=2147483647``
keeps freed blocks in the heap. But torch allocates with ``posix_memalign``, whose alignment
remainder can leave a freed block a few bytes too small for the next request of the same size,
so the heap can grow instead of reusing it (seen once, by hand, under ``strace -e trace=brk`` of
a loop allocating and freeing a 64 MB ``torch.ones`` in a fresh process with these settings:
+64 MB of brk per iteration; not kept as a benchmark). This benchmark trains one epoch of
each recipe over the first ``--users`` users of its dataset (their most recent ``max_len``
transitions, so every step has the table's full shape) in a fresh process per measurement,
alternating glibc's defaults and the tuned environment, ``--rounds``
times. Reported per recipe: median seconds per step, the share of the wall time spent in the
kernel, minor page faults per step, the child's peak RSS, and the median over rounds of the
per-round speed-up (back-to-back runs, so load on the machine hits both alike).

Usage: ``python benchmarks/bench_malloc.py [--users 1280] [--rounds 2]``; writes
``docs/results/malloc.{json,md}``. Needs the shared data (``ml-1m-sasrec``,
``amazon-beauty-s3rec``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECIPES = (("lrurec", "sasrec-ml1m"), ("lrurec", "bert4rec-ml1m"), ("lsan", "lsan-beauty"))
MODES = ("system", "tuned")
TUNED_ENV = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str((1 << 31) - 1)}

CHILD = r"""
import dataclasses, json, resource, sys, time
import numpy as np, torch
from seqrec.registry import get_model
from seqrec_lab import load_table
from seqrec_lab.runner import prepared_data
torch.set_num_threads(1)
table, run_id, users = sys.argv[1], sys.argv[2], int(sys.argv[3])
spec = load_table(table).select(run_ids={run_id})[0]
train = prepared_data(spec).split.train.select(np.arange(users))
cfg = dataclasses.replace(spec.experiment.model_config(), train_windows="last", epochs=1,
                          patience=0, num_threads=1)
model = get_model(spec.experiment.model)[1](cfg)
r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
model.fit(train, None, progress=False)
wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
steps = -(-users // model.train_batch_size)
print(json.dumps({"s_per_step": wall / steps, "sys_share": (r1.ru_stime - r0.ru_stime) / wall,
                  "minflt_per_step": (r1.ru_minflt - r0.ru_minflt) / steps,
                  "peak_rss_mb": r1.ru_maxrss / 1024, "steps": steps}))
"""


def measure(table: str, run_id: str, users: int, mode: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in TUNED_ENV}
    if mode == "tuned":
        env.update(TUNED_ENV)
    out = subprocess.run([sys.executable, "-c", CHILD, table, run_id, str(users)], env=env,
                         cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--users", type=int, default=1280)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--recipes", default=",".join(f"{t}:{r}" for t, r in RECIPES))
    p.add_argument("--out", default=str(ROOT / "docs" / "results" / "malloc"))
    args = p.parse_args(argv)
    t_start, loads, rows = time.time(), [], []
    for recipe in args.recipes.split(","):
        table, run_id = recipe.split(":")
        runs = {m: [] for m in MODES}
        for _ in range(args.rounds):
            for mode in MODES:
                loads.append(load_average())
                runs[mode].append(measure(table, run_id, args.users, mode))
        med = {m: {k: statistics.median(r[k] for r in runs[m])
                   for k in ("s_per_step", "sys_share", "minflt_per_step", "peak_rss_mb")}
               for m in MODES}
        speedup = statistics.median(a["s_per_step"] / b["s_per_step"]
                                    for a, b in zip(runs["system"], runs["tuned"]))
        row = {"recipe": recipe, "steps": runs["tuned"][0]["steps"], "median": med,
               "speedup": speedup, "runs": runs}
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "runs"}), flush=True)
    record = {
        "benchmark": "malloc_step_time",
        "command": "python " + " ".join([os.path.relpath(__file__, ROOT)] + (argv or sys.argv[1:])),
        "data": f"first {args.users} users of each recipe's dataset, their last max_len transitions",
        "protocol": "one training epoch per fresh process, modes alternated back to back",
        "hardware": f"{platform.platform()}; {platform.processor() or platform.machine()}; "
                    f"cpu_count={os.cpu_count()}; torch threads=1; libc={platform.libc_ver()}",
        "load_average_1min": loads, "seed": 0, "rows": rows,
        "wall_seconds": time.time() - t_start,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
    load = [x for x in loads if x is not None]
    lines = ["# CPU training steps: glibc malloc without mmap and trimming, against its defaults", "",
             f"Command: `{record['command']}`  ", f"Data: {record['data']}  ",
             f"Protocol: {record['protocol']}; {args.rounds} rounds; seed 0  ",
             f"Hardware: {record['hardware']}  ",
             f"Measured {record['time']}; 1-minute load average during the runs "
             f"{min(load, default=0):.1f}-{max(load, default=0):.1f} (other trainings shared the "
             "cores: absolute times are noisy, the speed-up is the median of per-round ratios).", "",
             "| recipe | steps | default s/step | tuned s/step | speed-up | kernel share default / tuned "
             "| minor faults per step default / tuned | peak RSS MB default / tuned |",
             "|---|---:|---:|---:|---:|---|---|---|"]
    for r in rows:
        a, b = r["median"]["system"], r["median"]["tuned"]
        lines.append(f"| `{r['recipe']}` | {r['steps']} | {a['s_per_step']:.3f} | {b['s_per_step']:.3f} | "
                     f"{r['speedup']:.2f}x | {a['sys_share']:.0%} / {b['sys_share']:.0%} | "
                     f"{a['minflt_per_step']:,.0f} / {b['minflt_per_step']:,.0f} | "
                     f"{a['peak_rss_mb']:,.0f} / {b['peak_rss_mb']:,.0f} |")
    lines += ["", "Tuned: `" + " ".join(f"{k}={v}" for k, v in TUNED_ENV.items()) + "`. Not adopted "
              "as a default: the gain is clear only where a step allocates tensors above glibc's "
              "32 MB mmap ceiling (BERT4Rec's [128, 2, 200, 200] attention scores), it costs peak "
              "memory there, and torch's aligned allocations can make the heap grow instead of "
              "reusing freed blocks, which a 10-step benchmark cannot rule out for a run of hours "
              "(see the benchmark's docstring)."]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
