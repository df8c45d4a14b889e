"""LRURec's last block in evaluation: the last state by a sum over time against the scan.

``LRUEncoder.encode_last`` needs only the last block's state after the last position. The
scan computes every state (the input product ``[B L, D + 1] x [D + 1, 2N]``, then the scan);
``LRULayer.last_state`` takes the sum over time first (``[2N, L] x [L, B (D + 1)]``, then a
``D + 1``-long dot per state) where the rows are long enough. This measures both on one thread:

* per batch shape ``B x L`` (about 16K positions, the evaluation's token budget; D 64,
  N 128): the fastest of ``--reps`` interleaved calls of each, process CPU time;
* with ``--eval``: the full-ranking evaluation of ``ml-1m-sasrec``'s 6,040 test users by
  LRURec at its ML-1M recipe (untrained weights, seed 0), ``--eval-reps`` interleaved
  evaluations with the last state by the scan and by ``last_state``, and whether the metrics
  are equal.

    .venv/bin/python benchmarks/bench_lru_last_state.py --eval

Writes docs/results/lru_last_state.{json,md} (``--out-stem``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results"
SHAPES = ((81, 200), (162, 100), (200, 80), (250, 65), (334, 49), (621, 26))


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=25, help="interleaved calls per shape")
    ap.add_argument("--eval", action="store_true", help="also the ML-1M evaluation A/B")
    ap.add_argument("--eval-reps", type=int, default=3)
    ap.add_argument("--out-stem", default="lru_last_state")
    return ap


if __name__ == "__main__":
    parser().parse_args()  # --help before the heavy imports

import os  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

sys.path.insert(0, str(ROOT / "src"))
from seqrec.evaluation.results import base_record, hardware_line, write_report  # noqa: E402
from seqrec.models import lrurec  # noqa: E402
from seqrec.models.lru_scan import lru_parallel_scan  # noqa: E402

SUM_OVER_TIME = lrurec.LRULayer.last_state


def by_scan(layer, x, mask):
    """The last state as the scan gives it (the previous ``encode_last``)."""
    return lru_parallel_scan(layer.inputs(x, mask), layer.lam())[:, -1]


def by_product(layer, x, mask):
    """The sum over time at every length (``last_state`` without its short-row fallback)."""
    keep = lrurec.LAST_STATE_PRODUCT_FROM
    lrurec.LAST_STATE_PRODUCT_FROM = 0.0
    try:
        return SUM_OVER_TIME(layer, x, mask)
    finally:
        lrurec.LAST_STATE_PRODUCT_FROM = keep


def shapes_part(reps: int) -> list[dict]:
    torch.manual_seed(0)
    layer = lrurec.LRULayer(64, 0.8, 0.99, 0.0).eval()
    rows = []
    with torch.inference_mode():
        for b, length in SHAPES:
            x = torch.randn(b, length, 64)
            mask = torch.ones(b, length, dtype=torch.bool)
            times: dict[str, list[float]] = {"scan": [], "sum_over_time": []}
            for _ in range(reps):
                for name, fn in (("scan", by_scan), ("sum_over_time", by_product)):
                    c = time.process_time()
                    fn(layer, x, mask)
                    times[name].append(time.process_time() - c)
            best = {k: min(v) * 1e3 for k, v in times.items()}
            rows.append(
                {
                    "batch": b,
                    "length": length,
                    "scan_ms": best["scan"],
                    "sum_over_time_ms": best["sum_over_time"],
                    "ratio": best["sum_over_time"] / best["scan"],
                    "last_state_uses": "sum over time"
                    if length >= lrurec.LAST_STATE_PRODUCT_FROM * 65
                    else "scan",
                }
            )
            print(rows[-1], flush=True)
    return rows


def eval_part(reps: int) -> dict:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_roofline import RUNS, evaluation_ready

    from seqrec.experiment import evaluate_model

    model, exp, split = evaluation_ready("lrurec")
    variants = {"scan": by_scan, "last_state": SUM_OVER_TIME}
    cpu: dict[str, list[float]] = {k: [] for k in variants}
    metrics = {}
    try:
        for _ in range(reps):
            for name, fn in variants.items():
                lrurec.LRULayer.last_state = fn
                c = time.process_time()
                metrics[name] = evaluate_model(model, exp, split.test).metrics
                cpu[name].append(time.process_time() - c)
    finally:
        lrurec.LRULayer.last_state = SUM_OVER_TIME
    return {
        "run": "lrurec:" + RUNS["lrurec"][1],
        "users": len(split.test),
        "cpu_s": cpu,
        "median_cpu_s": {k: statistics.median(v) for k, v in cpu.items()},
        "ratio": statistics.median(cpu["last_state"]) / statistics.median(cpu["scan"]),
        "metrics_equal": metrics["scan"] == metrics["last_state"],
        "max_metric_difference": max(
            abs(metrics["scan"][k] - metrics["last_state"][k]) for k in metrics["scan"]
        ),
        "metrics_differing": sorted(
            k for k in metrics["scan"] if metrics["scan"][k] != metrics["last_state"][k]
        ),
        "metrics": metrics,
    }


def markdown(record: dict) -> str:
    lines = [
        "# LRURec's last state in evaluation: sum over time against the scan\n",
        f"Command: `{record['command']}`  ",
        f"Protocol: {record['protocol']}  ",
        f"Hardware: {hardware_line(record['hardware'])}  ",
        f"Measured {record['created']}; 1-minute load average {record['load_range']} "
        "(process CPU seconds)\n",
        "| B x L | scan (ms) | sum over time (ms) | ratio | `last_state` uses |",
        "|---|---:|---:|---:|---|",
    ]
    for r in record["shapes"]:
        lines.append(
            f"| {r['batch']} x {r['length']} | {r['scan_ms']:.2f} | "
            f"{r['sum_over_time_ms']:.2f} | {r['ratio']:.2f} | {r['last_state_uses']} |"
        )
    e = record.get("eval")
    if e:
        m = e["median_cpu_s"]
        lines += [
            "",
            f"Full-ranking evaluation, `{e['run']}`, {e['users']:,} test users, "
            f"median CPU s of {len(e['cpu_s']['scan'])} interleaved runs: last state by the "
            f"scan {m['scan']:.2f}, by `last_state` {m['last_state']:.2f} "
            f"(ratio {e['ratio']:.2f}); metrics equal: {e['metrics_equal']} "
            f"(largest difference {e['max_metric_difference']:.1e}"
            + (f", in {', '.join(e['metrics_differing'])}" if e["metrics_differing"] else "")
            + "; the two sum the same terms in another order, so a float tie far down a "
            "list can turn).",
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    args = parser().parse_args()
    torch.set_num_threads(1)
    loads = [os.getloadavg()[0]]
    shapes = shapes_part(args.reps)
    loads.append(os.getloadavg()[0])
    ev = eval_part(args.eval_reps) if args.eval else None
    loads.append(os.getloadavg()[0])
    record = base_record(
        benchmark="lru_last_state",
        protocol=f"one thread; per shape the fastest of {args.reps} interleaved calls "
        "(D 64, N 128, untrained layer, inference mode)" + ("; ML-1M evaluation A/B" if ev else ""),
        shapes=shapes,
        eval=ev,
        load_range=f"{min(loads):.1f}-{max(loads):.1f}",
    )
    print(write_report(OUT, args.out_stem, record, markdown(record)))


if __name__ == "__main__":
    main()
