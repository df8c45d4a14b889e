"""Load test of `seqrec serve` over a real model: throughput, p50/p99 latency, errors, memory.

    OMP_NUM_THREADS=1 PYTHONPATH=src .venv/bin/python benchmarks/bench_serve_load.py
    ... --requests 10000 --clients 8 --max-seconds 300      # the defaults

1. Trains SASRec on the shipped ml-latest-small (5-core, leave-last-out; dim 64, 2 blocks,
   max_len 50, at most 3 epochs / 60 s: the model's accuracy is not the point, its size is
   that of a real one: 3,650 items x 64) and saves it with its users' histories.
2. Starts ``uvicorn seqrec.serving.service:app_from_env`` in a subprocess on 127.0.0.1 and a
   free port (never another address), 1 worker, OMP_NUM_THREADS=1.
3. ``--clients`` threads with keep-alive connections send ``--requests`` POSTs (stopping early
   at ``--max-seconds``), a fixed seeded mix: 70% ``/recommend`` with a history of 5-50 real
   items, 15% ``/recommend`` for a stored user id, 10% ``/recommend/batch`` of 8 stored users,
   5% with an allow list of 200 items and a deny list of 20; k = 10.
4. The server's RSS is sampled after 100 warm-up requests, half-way and at the end; the
   growth over the second half must stay under ``--rss-tolerance-mb`` (default 16 MiB: a
   leak of 4 KiB per request would show as 20 MiB over the 5,000 requests of a half).

Writes ``docs/results/serve_load.{json,md}``; exits 1 on any error, timeout or memory growth.
Client and server share the machine's cores, so the figures are a lower bound of the server.
"""

from __future__ import annotations

import argparse
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "docs" / "results"


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=10000)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--max-seconds", type=float, default=300.0)
    ap.add_argument("--rss-tolerance-mb", type=float, default=16.0)
    ap.add_argument("--out", default=str(OUT))
    return ap


if __name__ == "__main__":
    parser().parse_args()  # --help (and a wrong argument) before the heavy imports below

import json
import sys
import tempfile

import numpy as np

from seqrec.config import load_experiment
from seqrec.evaluation.results import base_record, hardware_line
from seqrec.experiment import run_experiment
from seqrec.serving.loadtest import HOST, load_test

TRAIN = [
    "data.name=ml-latest-small",
    "model.name=sasrec",
    "model.dim=64",
    "model.n_blocks=2",
    "model.max_len=50",
    "train.epochs=3",
    "train.max_train_seconds=60",
    "train.num_threads=1",
    "seed=0",
]


def payloads(model, n: int, seed: int = 0) -> list[tuple[str, dict]]:
    rng = np.random.default_rng(seed)
    users = [str(u) for u in model.user_histories.raw.tolist()]
    raw = model.vocab.raw
    out = []
    for _ in range(n):
        u = rng.random()
        if u < 0.70:
            hist = [
                int(i) if hasattr(i, "item") else i for i in rng.choice(raw, rng.integers(5, 51))
            ]
            out.append(("/recommend", {"history": [str(h) for h in hist], "k": 10}))
        elif u < 0.85:
            out.append(("/recommend", {"user": str(rng.choice(users)), "k": 10}))
        elif u < 0.95:
            out.append(
                (
                    "/recommend/batch",
                    {"requests": [{"user": str(x)} for x in rng.choice(users, 8)], "k": 10},
                )
            )
        else:
            allow = [str(x) for x in rng.choice(raw, 200, replace=False)]
            out.append(
                (
                    "/recommend",
                    {
                        "history": [str(x) for x in rng.choice(raw, 20)],
                        "allow": allow,
                        "deny": allow[:20],
                        "k": 10,
                    },
                )
            )
    return out


def markdown(rec: dict) -> str:
    r = rec["result"]
    lines = [
        "# seqrec serve under load",
        "",
        f"`{rec['command']}`",
        "",
        f"Model: {rec['model']} ({rec['n_items']:,} items, {rec['n_users']:,} stored users), "
        f"trained with `{' '.join('--set ' + s for s in TRAIN)}`.",
        f"Server: uvicorn, 1 worker, on {HOST} (loopback only), OMP_NUM_THREADS=1. "
        f"Clients: {rec['clients']} threads, keep-alive, on the same machine. Request mix: "
        "70% history, 15% stored user, 10% batch of 8 users, 5% allow/deny lists; k = 10.",
        f"Hardware: {hardware_line(rec['hardware'])}.",
        "",
        "| requests | errors | seconds | throughput (req/s) | p50 ms | p90 ms | p99 ms | max ms |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        f"| {r['requests']:,} | {r['errors']} | {r['seconds']:.1f} | {r['throughput_rps']:.1f} | "
        f"{r['p50_ms']:.1f} | {r['p90_ms']:.1f} | {r['p99_ms']:.1f} | {r['max_ms']:.1f} |",
        "",
        f"Server RSS: {r['rss_warm_mb']:.1f} MiB after {r['warmup_requests']} warm-up requests, "
        f"{r['rss_half_mb']:.1f} MiB half-way, {r['rss_end_mb']:.1f} MiB at the end: growth over "
        f"the second half {r['rss_growth_mb']:+.2f} MiB (tolerance {rec['rss_tolerance_mb']} MiB). "
        f"Verdict: **{'pass' if rec['passed'] else 'FAIL'}**.",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    args = parser().parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        exp = load_experiment(None, TRAIN)
        model, _ = run_experiment(exp, save_dir=Path(tmp) / "model")
        res = load_test(
            Path(tmp) / "model",
            payloads(model, 997),
            args.requests,
            args.clients,
            args.max_seconds,
            warmup=100,
        )
    passed = (
        res["errors"] == 0 and not res["timed_out"] and res["rss_growth_mb"] < args.rss_tolerance_mb
    )
    rec = base_record(
        benchmark="serve_load",
        model="sasrec",
        dataset="ml-latest-small",
        n_items=int(model.n_items),
        n_users=len(model.user_histories),
        train_overrides=TRAIN,
        clients=args.clients,
        requests_asked=args.requests,
        max_seconds=args.max_seconds,
        rss_tolerance_mb=args.rss_tolerance_mb,
        host=HOST,
        result=res,
        passed=passed,
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "serve_load.json").write_text(json.dumps(rec, indent=2, default=str) + "\n")
    (out / "serve_load.md").write_text(markdown(rec))
    print(markdown(rec))
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
