"""Speed of LRURec's recurrence: parallel scan vs sequential loop, incremental vs re-encoding.

Part 1: ``lru_parallel_scan`` against ``lru_sequential_scan`` (a Python loop over time) at
L in {64, 256, 1024, 4096}, forward + backward (gradients w.r.t. the inputs and lambda),
complex64, batches ``--batch`` (default 1 and 8), ``N = 2 * 64`` complex states (LRURec's
doubled hidden size).

Part 2: per-new-item inference. LRURec ``step`` (cached state, O(1) in the history length)
against SASRec re-encoding the whole window (L = 50 and 200) to score after each new item,
same hidden size (64) and 2 blocks, eval mode, no grad, including the full-catalogue scoring
``h E^T`` (3,416 items, ML-1M's catalogue) and without it.

Usage: ``python benchmarks/bench_lru_scan.py [--threads 1] [--quick]``; writes
``docs/results/lru_scan_speed.{json,md}``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="short lengths only (smoke test)")
    ap.add_argument("--out", default=str(ROOT / "docs" / "results" / "lru_scan_speed"))
    return ap


if __name__ == "__main__":
    parser().parse_args()  # --help (and a wrong argument) before the heavy imports below

import json
import math
import os
import platform
import statistics
import sys
import time
from types import SimpleNamespace

import torch

from seqrec.data.batching import SequenceBatch
from seqrec.models.lru_scan import lru_parallel_scan, lru_sequential_scan
from seqrec.models.lrurec import LRUEncoder


def timeit(fn, repeats: int, min_seconds: float = 0.2, warmup: bool = True) -> float:
    """Median seconds per call over ``repeats`` rounds (each >= min_seconds when cheap)."""
    if warmup:
        fn()
    t0 = time.perf_counter()
    fn()
    once = time.perf_counter() - t0
    inner = max(1, int(min_seconds / max(once, 1e-6)))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - t0) / inner)
    return statistics.median(times)


def scan_case(length: int, batch: int, n: int, repeats: int) -> dict:
    gen = torch.Generator().manual_seed(length)
    u0 = torch.complex(
        torch.randn(batch, length, n, generator=gen), torch.randn(batch, length, n, generator=gen)
    )
    r = 0.8 + 0.19 * torch.rand(n, generator=gen)
    lam0 = torch.polar(r, 2 * math.pi * torch.rand(n, generator=gen))

    def run(scan):
        u = u0.clone().requires_grad_(True)
        lam = lam0.clone().requires_grad_(True)
        out = scan(u, lam)
        out.real.sum().backward()
        return out

    # the two agree (sanity check inside the benchmark; also the warm-up)
    diff = (run(lru_parallel_scan) - run(lru_sequential_scan)).abs().max().item()
    # interleaved rounds, so that the load of a shared machine hits both alike
    rounds = 3 if length >= 1024 else repeats
    par, seq = [], []
    for _ in range(rounds):
        par.append(timeit(lambda: run(lru_parallel_scan), 1, warmup=False))
        seq.append(timeit(lambda: run(lru_sequential_scan), 1, min_seconds=0.0, warmup=False))
    ratios = [s / p for p, s in zip(par, seq, strict=True)]
    return {
        "L": length,
        "batch": batch,
        "N": n,
        "parallel_s": statistics.median(par),
        "sequential_s": statistics.median(seq),
        "speedup": statistics.median(ratios),
        "max_abs_diff": diff,
    }


class CausalTransformer(torch.nn.Module):
    """Fallback SASRec-like encoder (used only when seqrec.models.sasrec is missing)."""

    def __init__(self, n_items: int, d: int, blocks: int, max_len: int) -> None:
        super().__init__()
        self.n_items = n_items
        self.item = torch.nn.Embedding(n_items + 1, d)
        self.pos = torch.nn.Embedding(max_len, d)
        layer = torch.nn.TransformerEncoderLayer(
            d, 1, 4 * d, 0.0, batch_first=True, norm_first=True
        )
        self.enc = torch.nn.TransformerEncoder(layer, blocks, enable_nested_tensor=False)

    def forward(self, batch: SequenceBatch) -> torch.Tensor:
        L = batch.items.shape[1]
        x = self.item(batch.items) + self.pos.weight[:L]
        causal = torch.triu(torch.ones(L, L, dtype=torch.bool), 1)
        return self.enc(x, mask=causal)

    def score(self, hidden):
        return hidden @ self.item.weight.T


def sasrec_encoder(n_items: int, d: int, blocks: int, max_len: int):
    try:
        from seqrec.models import sasrec as mod

        cfg = mod.SASRecConfig(dim=d, n_blocks=blocks, max_len=max_len, dropout=0.0)
        return mod.SASRecEncoder(cfg, n_items).eval(), "seqrec.models.sasrec.SASRecEncoder"
    except Exception as exc:  # noqa: BLE001 - fall back, and say so in the record
        note = f"fallback causal nn.TransformerEncoder ({type(exc).__name__}: {exc})"
        return CausalTransformer(n_items, d, blocks, max_len).eval(), note


@torch.no_grad()
def incremental_case(length: int, batch: int, n_items: int, repeats: int) -> dict:
    d, blocks = 64, 2
    torch.manual_seed(0)
    lru = LRUEncoder(
        SimpleNamespace(dim=d, n_blocks=blocks, dropout=0.0, r_min=0.8, r_max=0.99), n_items
    ).eval()
    sas, sas_kind = sasrec_encoder(n_items, d, blocks, length)
    items = torch.randint(1, n_items + 1, (batch, length))
    new = torch.randint(1, n_items + 1, (batch,))
    state = lru.prefill(items[:, 1:])
    window = torch.cat((items[:, 1:], new[:, None]), dim=1)
    b = SequenceBatch(items=window, mask=window != 0)

    res = {"L": length, "batch": batch, "n_items": n_items, "sasrec": sas_kind}
    for scored in (False, True):

        def lru_step(scored=scored):
            _, h = lru.step(state, new)
            return lru.score(h) if scored else h

        def sas_full(scored=scored):
            h = sas(b)[:, -1]
            return sas.score(h) if scored else h

        def lru_full(scored=scored):
            h = lru(b)[:, -1]
            return lru.score(h) if scored else h

        t_step = timeit(lru_step, repeats)
        t_sas = timeit(sas_full, repeats)
        t_lru_full = timeit(lru_full, repeats)
        key = "with_scoring" if scored else "encoder_only"
        res[key] = {
            "lrurec_step_s": t_step,
            "sasrec_reencode_s": t_sas,
            "lrurec_reencode_s": t_lru_full,
            "ratio_sasrec_over_step": t_sas / t_step,
            "ratio_lrurec_reencode_over_step": t_lru_full / t_step,
        }
    return res


def main(argv=None) -> None:
    args = parser().parse_args(argv)
    torch.set_num_threads(args.threads)
    lengths = [64, 256] if args.quick else [64, 256, 1024, 4096]
    t0 = time.time()
    scans = []
    for batch in args.batch:
        for L in lengths:
            scans.append(scan_case(L, batch, 128, args.repeats))
            print(json.dumps(scans[-1]), flush=True)
    incs = []
    for L in (50, 200):
        for batch in (1, 128):
            incs.append(incremental_case(L, batch, 3416, args.repeats))
            print(json.dumps(incs[-1]), flush=True)
    record = {
        "benchmark": "lru_scan_speed",
        "command": "python " + " ".join([os.path.relpath(__file__, ROOT)] + (argv or sys.argv[1:])),
        "hardware": f"{platform.platform()}; {platform.processor() or platform.machine()}; "
        f"cpu_count={os.cpu_count()}; torch threads={args.threads}",
        "versions": {"python": platform.python_version(), "torch": torch.__version__},
        "device": "cpu",
        "seed": 0,
        "scan": scans,
        "incremental": incs,
        "wall_seconds": time.time() - t0,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(record, indent=2))
    lines = [
        "# LRURec recurrence speed",
        "",
        f"Command: `{record['command']}`  ",
        f"Hardware: {record['hardware']}  ",
        f"Versions: {record['versions']}; measured {record['time']}; the machine was shared "
        "with other jobs, so absolute times are noisy; ratios are measured in the same run.",
        "",
        "## Parallel scan vs sequential loop (forward + backward, complex64, N = 128)",
        "",
        "The loop is `lru_sequential_scan` (one fused step per time step, `unbind` over time so "
        "its backward is linear in L). Times are medians over interleaved rounds; the speed-up "
        "is the median of per-round ratios.",
        "",
        "| L | batch | parallel (ms) | sequential (ms) | speed-up | max abs diff |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for s in scans:
        lines.append(
            f"| {s['L']} | {s['batch']} | {1e3 * s['parallel_s']:.2f} | "
            f"{1e3 * s['sequential_s']:.2f} "
            f"| {s['speedup']:.1f}x | {s['max_abs_diff']:.1e} |"
        )
    lines += [
        "",
        "## Inference per new item: LRURec step vs re-encoding the window "
        "(d = 64, 2 blocks, 3,416 items)",
        "",
        f"SASRec encoder: {incs[0]['sasrec']}",
        "",
        "| L | batch | scoring | LRURec step (ms) | SASRec re-encode (ms) | SASRec / step "
        "| LRURec re-encode / step |",
        "|---:|---:|---|---:|---:|---:|---:|",
    ]
    for r in incs:
        for key in ("encoder_only", "with_scoring"):
            v = r[key]
            lines.append(
                f"| {r['L']} | {r['batch']} | {key} | {1e3 * v['lrurec_step_s']:.3f} | "
                f"{1e3 * v['sasrec_reencode_s']:.3f} | "
                f"{v['ratio_sasrec_over_step']:.1f}x | "
                f"{v['ratio_lrurec_reencode_over_step']:.1f}x |"
            )
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
