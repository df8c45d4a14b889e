"""Full-ranking evaluation with glibc's default allocator and with freed memory retained.

:func:`seqrec.allocator.retain_freed_memory` (what the ``seqrec`` command applies to its own
process) fixes glibc's mmap and trim thresholds so that the large transients of an evaluation
batch are reused rather than returned to the kernel and faulted in again. This measures its
effect where it matters: the full-ranking evaluation of ``ml-1m-sasrec``'s 6,040 test users
by SASRec, LRURec and HSTU at their ML-1M recipes (``bench_roofline.py``'s rows, untrained
weights: time does not depend on them), one thread.

Each (model, allocator) pair runs in its own process (the setting is process-wide and cannot
be undone): data, model, one warm-up evaluation, then ``--evals`` timed ones; ``--rounds``
rounds alternate which allocator goes first. Cells: the median over every timed evaluation of
process CPU seconds and minor page faults, the median peak resident size, and the largest
growth of the resident size from a process's first timed evaluation to its last; the metrics
of both allocators are checked equal.

    .venv/bin/python benchmarks/bench_eval_malloc.py
    .venv/bin/python benchmarks/bench_eval_malloc.py --models hstu --rounds 2

Writes docs/results/eval_malloc.{json,md} (``--out-stem``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results"
MODES = ("system", "retain")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="sasrec,lrurec,hstu")
    ap.add_argument("--rounds", type=int, default=3, help="process pairs per model")
    ap.add_argument("--evals", type=int, default=4, help="timed evaluations per process")
    ap.add_argument("--out-stem", default="eval_malloc")
    # internal: one measuring process for MODEL (its allocator comes from SEQREC_MALLOC)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    return ap


if __name__ == "__main__":
    parser().parse_args()  # --help before the heavy imports

import json  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))
from _report import timing_header  # noqa: E402

from seqrec.evaluation.results import base_record, write_report  # noqa: E402


def resident_mib() -> float:
    """The process's resident size now (Linux), MiB."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def child(model_name: str, evals: int) -> dict:
    """One process: apply the allocator setting (unless SEQREC_MALLOC=system), then time."""
    from seqrec.allocator import retain_freed_memory

    applied = retain_freed_memory()
    import torch
    from bench_roofline import evaluation_ready

    from seqrec.experiment import evaluate_model

    torch.set_num_threads(1)
    model, exp, split = evaluation_ready(model_name)
    metrics = evaluate_model(model, exp, split.test)  # warm-up
    runs = []
    for _ in range(evals):
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        w, c = time.perf_counter(), time.process_time()
        evaluate_model(model, exp, split.test)
        runs.append(
            {
                "cpu_s": time.process_time() - c,
                "wall_s": time.perf_counter() - w,
                "minor_faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults,
                "rss_mib": resident_mib(),
            }
        )
    return {
        "applied": applied,
        "runs": runs,
        "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "metrics": {k: float(v) for k, v in metrics.metrics.items()},
    }


def run_child(model_name: str, mode: str, evals: int) -> dict:
    env = {**os.environ, "SEQREC_MALLOC": "system" if mode == "system" else ""}
    env["OMP_NUM_THREADS"] = "1"
    out = subprocess.run(
        [sys.executable, __file__, "--child", model_name, "--evals", str(evals)],
        env=env,
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{model_name} ({mode}) failed:\n{out.stderr[-2000:]}")
    res = json.loads(out.stdout.strip().splitlines()[-1])
    if res["applied"] != (mode == "retain"):
        raise RuntimeError(f"{model_name} ({mode}): the allocator setting was not as asked")
    return res


def measure(model_name: str, rounds: int, evals: int) -> dict:
    per_mode: dict[str, list[dict]] = {m: [] for m in MODES}
    for r in range(rounds):
        for mode in MODES if r % 2 == 0 else MODES[::-1]:
            per_mode[mode].append(run_child(model_name, mode, evals))
            print(model_name, mode, per_mode[mode][-1]["runs"], flush=True)
    metrics = {m: per_mode[m][0]["metrics"] for m in MODES}
    if metrics["system"] != metrics["retain"]:
        raise AssertionError(f"{model_name}: metrics differ between allocators: {metrics}")
    out: dict = {"metrics": metrics["system"], "processes": per_mode}
    for m in MODES:
        runs = [run for proc in per_mode[m] for run in proc["runs"]]
        out[m] = {
            "cpu_s": statistics.median(r["cpu_s"] for r in runs),
            "wall_s": statistics.median(r["wall_s"] for r in runs),
            "minor_faults": statistics.median(r["minor_faults"] for r in runs),
            "max_rss_mib": statistics.median(p["max_rss_mib"] for p in per_mode[m]),
            # growth of the resident size from the first timed evaluation to the last
            "rss_growth_mib": max(
                p["runs"][-1]["rss_mib"] - p["runs"][0]["rss_mib"] for p in per_mode[m]
            ),
        }
    out["cpu_ratio"] = out["retain"]["cpu_s"] / out["system"]["cpu_s"]
    return out


def markdown(record: dict) -> str:
    lines = [
        *timing_header("Evaluation with freed memory retained (glibc malloc thresholds)", record),
        f"Data: {record['data']}\n",
        "| model | CPU s, default | CPU s, retained | retained / default | minor faults, "
        "default | minor faults, retained | peak RSS MiB, default | peak RSS MiB, retained | "
        "RSS growth MiB, default | RSS growth MiB, retained |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in record["models"].items():
        s, t = r["system"], r["retain"]
        lines.append(
            f"| {name} | {s['cpu_s']:.2f} | {t['cpu_s']:.2f} | {r['cpu_ratio']:.2f} "
            f"| {s['minor_faults']:,.0f} | {t['minor_faults']:,.0f} | {s['max_rss_mib']:.0f} "
            f"| {t['max_rss_mib']:.0f} | {s['rss_growth_mib']:+.0f} | {t['rss_growth_mib']:+.0f} |"
        )
    lines += [
        "",
        "Default: glibc's own thresholds (`SEQREC_MALLOC=system`); retained: "
        "`seqrec.allocator.retain_freed_memory()`. Metrics equal in both (checked). RSS growth: "
        "the largest change of a process's resident size from its first timed evaluation to its "
        "last (a heap that kept growing under the retained setting would show here).",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    args = parser().parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.evals)))
        return
    loads = [os.getloadavg()[0]]
    models = {}
    for name in args.models.split(","):
        models[name] = measure(name, args.rounds, args.evals)
        loads.append(os.getloadavg()[0])
    record = base_record(
        benchmark="eval_malloc",
        data="ml-1m-sasrec, leave-last-out, the 6,040 test users (each model's ML-1M recipe)",
        protocol=f"one thread; per model {args.rounds} rounds of one process per allocator "
        f"(order alternating), each one warm-up and {args.evals} timed full-ranking "
        "evaluations; medians of process CPU s, minor faults, peak RSS; untrained weights, "
        "seed 0",
        models=models,
        load_range=f"{min(loads):.1f}-{max(loads):.1f}",
    )
    print(write_report(OUT, args.out_stem, record, markdown(record)))


if __name__ == "__main__":
    main()
