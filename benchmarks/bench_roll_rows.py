"""Turning left-padded rows right-padded and back: ``roll_rows`` against the element-wise gather.

SASRec's evaluation (``SASRecEncoder.encode_last``) runs its blocks but the last on rows turned
right-padded, and GRU4Rec packs its rows the same way, once each way per batch. This times one
turn of a ``[B, L, D]`` float32 batch with random PAD counts, one thread, both ways interleaved:
``gather`` with the position index expanded over the features (the former code) and
:func:`seqrec.models.layers.roll_rows` (one ``index_select`` of whole positions); cells are the
fastest of ``--reps`` calls, process CPU microseconds, and the two results are checked equal.

    .venv/bin/python benchmarks/bench_roll_rows.py

Writes docs/results/roll_rows.{json,md} (``--out-stem``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results"
# (what runs at this shape, rows, width, features)
CASES = (
    ("SASRec evaluation, ML-1M (16K positions a batch)", 80, 200, 64),
    ("SASRec evaluation, Amazon (length 50)", 320, 50, 64),
    ("GRU4Rec training, ML-1M windows", 128, 200, 64),
)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=50, help="interleaved calls per way")
    ap.add_argument("--out-stem", default="roll_rows")
    return ap


if __name__ == "__main__":
    parser().parse_args()  # --help before the heavy imports

import os  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))
from _report import timing_header  # noqa: E402

from seqrec.evaluation.results import base_record, write_report  # noqa: E402
from seqrec.models.layers import roll_rows  # noqa: E402


def gather_rows(x: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
    """The former rotation: an int64 index per element."""
    b, length, d = x.shape
    pos = torch.arange(length)
    return x.gather(1, ((pos[None] + offset[:, None]) % length)[..., None].expand(b, length, d))


def measure(rows: int, width: int, dim: int, reps: int) -> dict:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(rows, width, dim, generator=g)
    offset = torch.randint(0, width, (rows,), generator=g)
    if not torch.equal(gather_rows(x, offset), roll_rows(x, offset)):
        raise AssertionError("roll_rows differs from the gather")
    times: dict[str, list[float]] = {"gather": [], "roll_rows": []}
    for _ in range(reps):
        for name, fn in (("gather", gather_rows), ("roll_rows", roll_rows)):
            c = time.process_time()
            fn(x, offset)
            times[name].append(time.process_time() - c)
    us = {k: min(v) * 1e6 for k, v in times.items()}
    return {"us": us, "speedup": us["gather"] / us["roll_rows"]}


def markdown(record: dict) -> str:
    lines = [
        *timing_header("Rotating padded rows: `roll_rows` against the element-wise gather", record),
        "| where | B x L x D | gather (us) | roll_rows (us) | gather / roll_rows |",
        "|---|---|---:|---:|---:|",
    ]
    for r in record["cases"]:
        lines.append(
            f"| {r['where']} | {r['rows']} x {r['width']} x {r['dim']} | {r['us']['gather']:.0f} "
            f"| {r['us']['roll_rows']:.0f} | {r['speedup']:.1f}x |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    args = parser().parse_args()
    torch.set_num_threads(1)
    loads = [os.getloadavg()[0]]
    cases = []
    for where, rows, width, dim in CASES:
        cases.append(
            {"where": where, "rows": rows, "width": width, "dim": dim}
            | measure(rows, width, dim, args.reps)
        )
        loads.append(os.getloadavg()[0])
        print(cases[-1], flush=True)
    record = base_record(
        benchmark="roll_rows",
        protocol=f"one thread, float32, random PAD counts (seed 0); fastest of {args.reps} "
        "interleaved calls per way, process CPU time; results checked equal",
        cases=cases,
        load_range=f"{min(loads):.1f}-{max(loads):.1f}",
    )
    print(write_report(OUT, args.out_stem, record, markdown(record)))


if __name__ == "__main__":
    main()
