"""Full cross-entropy on CPU: how many logits a chunk should hold.

``seqrec.training.losses.full_ce_loss`` computes the softmax cross-entropy in row chunks of
``min(ce_chunk, max_chunk_logits // (I + 1))`` rows; each chunk's ``[rows, I + 1]`` logits are
written by one product, read by the softmax, and read again by the two gradient products. This
times the loss's forward and backward (one thread, d 64, float32) at the catalogue sizes of the
datasets we hold, for the last-position training of the FMLP-Rec line (256 rows a batch) and for
every-position training (6,400 or 25,600 rows), at several caps on the logits per chunk; cells
are the fastest of ``--reps`` interleaved calls, process CPU milliseconds.

    .venv/bin/python benchmarks/bench_ce_chunk.py

Writes docs/results/ce_chunk.{json,md} (``--out-stem``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results"
# (catalogue, items, rows a batch)
CASES = (
    ("ML-1M", 3416, 256),
    ("ML-1M", 3416, 25600),
    ("Beauty", 12101, 256),
    ("Sports", 18357, 256),
    ("Sports", 18357, 6400),
    ("Video Games", 23715, 256),
)
CAPS = {"16M": 1 << 24, "2M": 1 << 21, "1M": 1 << 20, "512K": 1 << 19}


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--reps", type=int, default=9, help="interleaved calls per cap (3 above 1K rows)"
    )
    ap.add_argument("--out-stem", default="ce_chunk")
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
from seqrec.training.losses import CPU_CHUNK_LOGITS, full_ce_loss  # noqa: E402


def measure(items: int, rows: int, reps: int) -> dict:
    torch.manual_seed(0)
    w = (0.1 * torch.randn(items + 1, 64)).requires_grad_()
    h = torch.randn(rows, 1, 64).requires_grad_()
    t = torch.randint(1, items + 1, (rows, 1))
    times: dict[str, list[float]] = {k: [] for k in CAPS}
    for _ in range(reps if rows <= 1024 else max(1, reps // 3)):
        for name, cap in CAPS.items():
            c = time.process_time()
            full_ce_loss(h, t, w, max_chunk_logits=cap).backward()
            times[name].append(time.process_time() - c)
    return {
        "ms": {k: min(v) * 1e3 for k, v in times.items()},
        "chunk_rows": {k: max(1, min(256, cap // (items + 1))) for k, cap in CAPS.items()},
    }


def markdown(record: dict) -> str:
    caps = list(CAPS)
    lines = [
        *timing_header("Full cross-entropy on CPU: logits per chunk", record),
        "Forward + backward of `full_ce_loss`, ms (rows a chunk in brackets); the library's CPU "
        f"cap is {record['cpu_chunk_logits']:,} logits.\n",
        "| catalogue | items | rows | " + " | ".join(f"cap {c}" for c in caps) + " |",
        "|---|---:|---:|" + "---:|" * len(caps),
    ]
    for r in record["cases"]:
        cells = [f"{r['ms'][c]:.1f} ({r['chunk_rows'][c]})" for c in caps]
        lines.append(
            f"| {r['catalogue']} | {r['items']:,} | {r['rows']:,} | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    args = parser().parse_args()
    torch.set_num_threads(1)
    loads = [os.getloadavg()[0]]
    cases = []
    for name, items, rows in CASES:
        cases.append(
            {"catalogue": name, "items": items, "rows": rows} | measure(items, rows, args.reps)
        )
        loads.append(os.getloadavg()[0])
        print(cases[-1], flush=True)
    record = base_record(
        benchmark="ce_chunk",
        protocol=f"one thread, d 64, float32; fastest of {args.reps} interleaved calls "
        "per cap (a third of that above 1K rows)",
        cpu_chunk_logits=CPU_CHUNK_LOGITS,
        cases=cases,
        load_range=f"{min(loads):.1f}-{max(loads):.1f}",
    )
    print(write_report(OUT, args.out_stem, record, markdown(record)))


if __name__ == "__main__":
    main()
