"""The AdamW step: torch's plain implementation against its fused kernel (the trainer's choice
where every parameter is a real floating tensor on CPU or CUDA).

The plain step makes one pass over every parameter per elementwise operation (moment updates,
square root, division, the update itself); the fused one makes one. Per encoder, at a recipe's
sizes (untrained weights, random gradients, weight decay 0.01, one thread): the median of
``--steps`` interleaved steps each way, process CPU ms, and the largest difference of a weight
after them (the same update up to float rounding).

    .venv/bin/python benchmarks/bench_optimizer.py

Writes docs/results/optimizer.{json,md} (``--out-stem``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results"
# label -> (model, items, settings)
CASES = {
    "SASRec, ML-1M (d 64, 3,416 items)": ("sasrec", 3416, {"dim": 64, "max_len": 200}),
    "TV-Rec, Sports (D 128, 18,357 items)": (
        "tvrec",
        18357,
        {"dim": 128, "max_len": 50, "n_basis": 16},
    ),
    "SASRec, 1M items (d 64)": ("sasrec", 1_000_000, {"dim": 64, "max_len": 50}),
}


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=15, help="interleaved steps each way")
    ap.add_argument("--out-stem", default="optimizer")
    return ap


if __name__ == "__main__":
    parser().parse_args()  # --help before the heavy imports

import os  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))
from _report import timing_header  # noqa: E402

from seqrec.evaluation.results import base_record, write_report  # noqa: E402
from seqrec.models.neural_config import settings  # noqa: E402
from seqrec.registry import get_model  # noqa: E402


def encoder(name: str, items: int, kwargs: dict) -> torch.nn.Module:
    config_cls, model_cls = get_model(name)
    torch.manual_seed(0)
    return model_cls.encoder_cls(settings(config_cls, **kwargs), items)


def measure(name: str, items: int, kwargs: dict, steps: int) -> dict:
    ways = {"plain": False, "fused": True}
    params, opts = {}, {}
    for way, fused in ways.items():
        enc = encoder(name, items, kwargs)
        g = torch.Generator().manual_seed(1)
        for p in enc.parameters():
            p.grad = torch.randn(p.shape, generator=g)
        params[way] = list(enc.parameters())
        opts[way] = torch.optim.AdamW(params[way], lr=1e-3, weight_decay=0.01, fused=fused)
    cpu: dict[str, list[float]] = {k: [] for k in ways}
    for _ in range(steps):
        for way in ways:
            c = time.process_time()
            opts[way].step()
            cpu[way].append(time.process_time() - c)
    diff = max(
        (a - b).abs().max().item() for a, b in zip(params["plain"], params["fused"], strict=True)
    )
    ms = {k: statistics.median(v) * 1e3 for k, v in cpu.items()}
    return {
        "parameters": sum(p.numel() for p in params["plain"]),
        "ms": ms,
        "ratio": ms["fused"] / ms["plain"],
        "max_weight_diff": diff,
    }


def markdown(record: dict) -> str:
    lines = [
        *timing_header("The AdamW step: plain against fused", record),
        "| encoder | parameters | plain (ms) | fused (ms) | fused / plain | max weight diff |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in record["cases"]:
        lines.append(
            f"| {r['encoder']} | {r['parameters']:,} | {r['ms']['plain']:.1f} | "
            f"{r['ms']['fused']:.1f} | {r['ratio']:.2f} | {r['max_weight_diff']:.1e} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    args = parser().parse_args()
    torch.set_num_threads(1)
    loads = [os.getloadavg()[0]]
    cases = []
    for label, (name, items, kwargs) in CASES.items():
        cases.append({"encoder": label} | measure(name, items, kwargs, args.steps))
        loads.append(os.getloadavg()[0])
        print(cases[-1], flush=True)
    record = base_record(
        benchmark="optimizer",
        protocol=f"untrained weights, random gradients (seed 1), lr 1e-3, weight decay 0.01, "
        f"one thread; median of {args.steps} interleaved steps each way, process CPU time",
        cases=cases,
        load_range=f"{min(loads):.1f}-{max(loads):.1f}",
    )
    print(write_report(OUT, args.out_stem, record, markdown(record)))


if __name__ == "__main__":
    main()
