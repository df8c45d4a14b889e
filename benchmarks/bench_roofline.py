"""Roofline: FLOPs, time and achieved share of the measured matmul rate, every neural model.

For each registered neural model at its ML-1M recipe (``ml-1m-sasrec``, leave-last-out, the
row of the reproduction table named in ``RUNS``: max_len 200, d 64 or the recipe's, the
recipe's loss and batch; BSARec and TV-Rec, which have no ML-1M row, at their authors' Beauty
recipe on the ML-1M file: length 50, every prefix), one run measures

* the machine's fp32 matmul rate: a square ``--gemm``-cubed product on one thread and on two,
  and the thin products the models run (``[25600, 64] x [64, d']``, the CE chunk, scoring);
  the one-thread square rate is re-measured between every model's timed steps and its median
  in that model's run is the rate its fractions use (the machine is shared: a rate measured an
  hour earlier would not apply);
* **training**: the FLOPs of one optimizer step as executed (``torch.utils.flop_counter``:
  matrix products only; SDPA's CPU kernels are registered with torch's own SDPA formulas here),
  the analytic count for SASRec, LRURec and HSTU on the same batch (formulas below; the ratio
  checks both), the median time of ``--steps`` steps (forward, loss, backward, AdamW), one
  thread; an epoch is ``steps_per_epoch`` such steps (FLOPs and time per step times steps, not
  a timed epoch);
* **evaluation**: full ranking of the 6,040 test users (history filter as the recipe says), its
  FLOPs as executed (flop counter over the whole evaluation), wall and CPU time on one thread,
  and for SASRec, LRURec and HSTU the FLOP floor: encoding each history once at its own length
  (the last layer at the last position only) plus the ``[U, D] x [D, I + 1]`` scoring, at the
  square rate (the issue's bar) and at the rate of the fastest thin ``[25600, d] x [d, d']``
  product (what a d = 64 model's products reach at best).

The process keeps freed memory for reuse as the ``seqrec`` command does
(:func:`seqrec.allocator.retain_freed_memory`; ``SEQREC_MALLOC=system`` measures glibc's
defaults). Times are process CPU seconds (the machine is shared: a descheduled second is not
the model's), the rates too (CPU time of the best of three products); wall times are in the JSON.
Achieved share = FLOPs / CPU time / rate. Weights are untrained (time and FLOPs do not depend on
them). Elementwise work (softmax, norms, the LRU scan, dropout masks) is not counted as FLOPs:
it is what keeps a model below the matmul rate.

Analytic FLOPs (forward; ``B`` rows, width ``L``, ``T = B L`` positions, ``P`` CE targets,
``nb`` blocks, ``I`` items, a matrix product of ``m x k`` by ``k x n`` = ``2 m k n``;
training = 3 x forward for every product, CE = ``6 P d (I + 1)``):

* SASRec: per block ``2 T (d d + 2 d d + 2 d f) + 4 B L L d`` (Q, K/V, FFN of width ``f``;
  attention over all ``L x L`` pairs, as the fused kernel computes them; its backward
  recomputes the scores: 5 products, so the attention trains at 3.5 x forward);
* LRURec (``N = 2d`` complex states, ``4d`` real): per block ``2 T (4d (d + 1) + 4d d + 8 d d)``
  (input with its bias column, output, PFFN ``d -> 4d -> d``) on the columns left after the
  all-PAD ones are skipped; training adds the PFFN's ``W1 x`` once more (recomputed in backward
  instead of saved);
* HSTU (``H`` heads of ``dqk, dv``): per block ``2 T d H (2 dv + 2 dqk) + 2 T H dv d + 2 B H L L
  (dqk + dv)``.

Floors for evaluation, per user with ``n`` items: the same terms at width ``n`` with causal
attention (``n (n + 1) / 2`` pairs) and, in the last block, only what the last position needs
(its query, attention row, output and FFN; keys/values or the LRU input and scan for all ``n``).

    nice -n -5 .venv/bin/python benchmarks/bench_roofline.py
    .venv/bin/python benchmarks/bench_roofline.py --models sasrec,lrurec --steps 2 --no-eval
    .venv/bin/python benchmarks/bench_roofline.py --models bsarec,tvrec --merge

Writes docs/results/roofline.{json,md} (``--out-stem``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results"

# model -> (reproduction table, run id): the model's ML-1M recipe
RUNS = {
    "sasrec": ("lrurec", "sasrec-ml1m"),
    "lrurec": ("lrurec", "lrurec-ml1m"),
    "hstu": ("hstu", "hstu-ml1m"),
    "lsan": ("defaults", "lsan-sliding-ml1m"),
    "bert4rec": ("lrurec", "bert4rec-ml1m"),
    "fmlprec": ("lrurec", "fmlprec-ml1m"),
    "gru4rec": ("lrurec", "gru4rec-ml1m"),
    "narm": ("lrurec", "narm-ml1m"),
    "caser": ("defaults", "caser-sliding-ml1m"),
    "fpmc": ("lrurec", "fpmc-ml1m"),
    "fism": ("lrurec", "fism-ml1m"),
    "mf": ("lrurec", "mf-ml1m"),
    # no ML-1M row: the authors' Beauty recipe (length 50, every prefix) on the ML-1M file
    "bsarec": ("frequency", "bsarec-beauty", "ml-1m-sasrec"),
    "tvrec": ("frequency", "tvrec-beauty", "ml-1m-sasrec"),
}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--models", default=",".join(RUNS), help="comma-separated, from RUNS")
    p.add_argument("--steps", type=int, default=3, help="timed training steps per model")
    p.add_argument("--gemm", type=int, default=2048, help="size of the square reference GEMM")
    p.add_argument("--no-eval", action="store_true", help="skip the full-ranking evaluation")
    p.add_argument("--out-stem", default="roofline")
    p.add_argument(
        "--render", action="store_true", help="only rewrite the .md from the existing .json"
    )
    p.add_argument(
        "--merge",
        action="store_true",
        help="measure --models and replace their rows in the existing .json (the others, "
        "and the machine section, kept; the merge is recorded with its own rates and load)",
    )
    return p


if __name__ == "__main__":
    parser().parse_args()  # --help (and a wrong argument) before the heavy imports below

import dataclasses
import json
import os
import statistics
import sys
import time

import numpy as np
import torch
from torch.utils import flop_counter

sys.path.insert(0, str(ROOT / "src"))
from seqrec.allocator import retain_freed_memory  # noqa: E402
from seqrec.evaluation.results import base_record, hardware_line, write_report  # noqa: E402
from seqrec.experiment import build_model, evaluate_model, prepare_data  # noqa: E402
from seqrec.models.torch_recommender import resolved_batch  # noqa: E402
from seqrec_lab.spec import load_table  # noqa: E402

_aten = torch.ops.aten


def _register_formulas() -> None:
    """What torch's flop counter misses on CPU: the in-place ``addmm_`` (the CE's item-gradient
    product) counts as ``addmm``; SDPA's CPU flash kernel gets torch's SDPA formulas (forward:
    QK^T and AV; backward: five products, the scores recomputed)."""
    if _aten.addmm_.default not in flop_counter.flop_registry:

        @flop_counter.register_flop_formula(_aten.addmm_)
        def _addmm_(self_shape, a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
            return 2 * a_shape[0] * a_shape[1] * b_shape[1]

    fwd = getattr(_aten, "_scaled_dot_product_flash_attention_for_cpu", None)
    bwd = getattr(_aten, "_scaled_dot_product_flash_attention_for_cpu_backward", None)
    if fwd is None or fwd in flop_counter.flop_registry:
        return

    @flop_counter.register_flop_formula(fwd)
    def _fwd(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
        return flop_counter.sdpa_flop_count(query_shape, key_shape, value_shape)

    if bwd is not None:

        @flop_counter.register_flop_formula(bwd)
        def _bwd(grad_out_shape, query_shape, key_shape, value_shape, *args, out_shape=None,
                 **kwargs) -> int:  # fmt: skip
            return flop_counter.sdpa_backward_flop_count(
                grad_out_shape, query_shape, key_shape, value_shape
            )


def count_flops(fn) -> int:
    with flop_counter.FlopCounterMode(display=False) as fc:
        fn()
    return int(fc.get_total_flops())


# --- the machine's rate -----------------------------------------------------------------
def gemm_rate(m: int, k: int, n: int, threads: int = 1, reps: int = 3) -> float:
    """GFLOP/s of ``[m, k] x [k, n]`` (fp32, best of ``reps`` after one warm-up), per second of
    process CPU time (with two threads: per second of both threads' time, times two)."""
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        a, b = torch.randn(m, k), torch.randn(k, n)
        out = torch.empty(m, n)
        torch.mm(a, b, out=out)
        best = float("inf")
        for _ in range(reps):
            t0 = time.process_time()
            torch.mm(a, b, out=out)
            best = min(best, time.process_time() - t0)
        return 2 * m * k * n / best / 1e9 * threads
    finally:
        torch.set_num_threads(old)


THIN = {
    "[25600,64]x[64,64]": (25600, 64, 64),
    "[25600,64]x[64,256]": (25600, 64, 256),
    "[25600,256]x[256,64]": (25600, 256, 64),
    "CE chunk [256,64]x[64,3417]": (256, 64, 3417),
    "scoring [1024,64]x[64,3417]": (1024, 64, 3417),
}


# --- analytic FLOPs ---------------------------------------------------------------------
def _dims(model) -> dict:
    c = model.config
    d = c.dim
    out = {"d": d, "nb": c.n_blocks}
    if model.name == "sasrec":
        out["f"] = c.ffn_dim or d
        out["out_proj"] = bool(c.attn_out_proj)
    if model.name == "hstu":
        h = c.n_heads
        out.update(h=h, dqk=c.d_qk or max(1, d // h), dv=c.d_v or max(1, d // h))
    return out


def encoder_forward_flops(
    name: str, dims: dict, b: int, length: int, forward_only: bool = True
) -> float:
    """Forward matmul FLOPs of the encoder on a ``[b, length]`` batch, as executed (with
    ``forward_only=False``: a third of the training step's, see SASRec's attention)."""
    d, nb, t = dims["d"], dims["nb"], b * length
    if name == "sasrec":
        f = dims["f"]
        lin = 2 * t * (3 * d * d + 2 * d * f + (d * d if dims["out_proj"] else 0))
        # the fused kernel's backward recomputes the scores: 5 products against 2 forward
        attn = 4 * b * length * length * d * (1.0 if forward_only else 7 / 6)
        return nb * (lin + attn)
    if name == "lrurec":
        return nb * 2 * t * (4 * d * (d + 1) + 4 * d * d + 8 * d * d)
    if name == "hstu":
        h, dqk, dv = dims["h"], dims["dqk"], dims["dv"]
        lin = 2 * t * d * h * (2 * dv + 2 * dqk) + 2 * t * h * dv * d
        return nb * (lin + 2 * b * h * length * length * (dqk + dv))
    raise KeyError(name)


def train_step_flops(model, data: dict) -> float | None:
    """Analytic FLOPs of one training step (forward + backward) on ``data``; None where the
    model or its loss has no formula here."""
    if model.name not in ("sasrec", "lrurec", "hstu") or model.train_config.loss != "ce":
        return None
    batch = data["batch"]
    b, length = batch.items.shape
    if model.name == "lrurec":  # all-PAD columns are skipped
        real = batch.mask.any(0)
        length = length - int(real.float().argmax()) if bool(real.any()) else 0
    dims = _dims(model)
    p = int((batch.targets > 0).sum())
    n_out = model.n_items + 1
    enc = encoder_forward_flops(model.name, dims, b, length, forward_only=False)
    # LRURec's fused PFFN recomputes its first product (W1 x) in backward
    redo = dims["nb"] * 2 * b * length * 4 * dims["d"] ** 2 if model.name == "lrurec" else 0
    return 3 * enc + redo + 6 * p * dims["d"] * n_out


def eval_floor_flops(model, lengths: np.ndarray) -> float | None:
    """FLOPs that full ranking needs: each history once at its own length ``n`` (causal
    attention; the last block at the last position only) plus the scoring product."""
    if model.name not in ("sasrec", "lrurec", "hstu"):
        return None
    dims = _dims(model)
    d, nb = dims["d"], dims["nb"]
    n = np.minimum(lengths, model.config.max_len).astype(np.float64)
    pairs = n * (n + 1) / 2  # causal (query, key) pairs
    if model.name == "sasrec":
        f = dims["f"]
        per_pos = 2 * (3 * d * d + 2 * d * f + (d * d if dims["out_proj"] else 0))
        last_pos = 2 * (d * d + 2 * d * f + (d * d if dims["out_proj"] else 0))  # Q, FFN, out
        full = per_pos * n + 4 * d * pairs
        last = 2 * 2 * d * d * n + last_pos + 4 * d * n  # K/V at every position, one query
    elif model.name == "lrurec":
        inp, rest = 2 * 4 * d * (d + 1), 2 * (4 * d * d + 8 * d * d)
        full = (inp + rest) * n
        last = inp * n + rest
    else:
        h, dqk, dv = dims["h"], dims["dqk"], dims["dv"]
        proj = 2 * d * h * (2 * dv + 2 * dqk) + 2 * h * dv * d
        full = proj * n + 2 * h * (dqk + dv) * pairs
        last = 2 * d * h * (dv + dqk) * n + proj + 2 * h * (dqk + dv) * n
    encode = float(((nb - 1) * full + last).sum())
    return encode + 2 * len(n) * d * (model.n_items + 1)


# --- one model --------------------------------------------------------------------------
def _run_label(name: str) -> str:
    table, run_id, *dataset = RUNS[name]
    return f"{table}:{run_id}" + (f" on {dataset[0]}" if dataset else "")


def _spec(name: str):
    """The run spec of ``name``'s recipe, and its experiment (on the ML-1M file where the
    recipe is another dataset's)."""
    table, run_id, *dataset = RUNS[name]
    runs = [r for r in load_table(table, ROOT).runs if r.run_id == run_id]
    if not runs:
        raise KeyError(f"run {run_id!r} not in configs/reproduce/{table}.toml")
    spec = min(runs, key=lambda r: r.seed)
    if dataset:
        exp = spec.experiment
        exp = dataclasses.replace(exp, data=dataclasses.replace(exp.data, name=dataset[0]))
        spec = dataclasses.replace(spec, experiment=exp)
    return spec


def evaluation_ready(name: str):
    """``(model, experiment, split)``: ``name``'s recipe with untrained weights (seed 0), in
    evaluation mode, on its data and split (time does not depend on the weights)."""
    exp = _spec(name).experiment
    split = prepare_data(exp).split
    model = build_model(exp)
    model._remember_catalogue(split.train)
    torch.manual_seed(0)
    model.encoder = model.build_encoder(split.train.n_items)
    model.encoder.eval()
    return model, exp, split


def train_part(model, split, args) -> dict:
    from seqrec.training.negatives import NegativeSampler

    train = split.train
    model._remember_catalogue(train)
    windows, model._row_source, rows = model.training_rows(train)
    max_len = model.config.max_len
    batch_size = resolved_batch(model.train_config, windows, rows, max_len).batch_size
    steps_per_epoch = -(-len(rows) // batch_size)
    torch.manual_seed(0)
    model.encoder = model.build_encoder(train.n_items)
    model.encoder.train()
    if model.train_config.loss in ("bce", "gbce", "sampled_softmax"):
        model._sampler = NegativeSampler(train)
    opt = torch.optim.AdamW(model.encoder.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    order = rng.permutation(rows)
    batches = [
        model.make_batch(windows, order[i * batch_size : (i + 1) * batch_size], rng)
        for i in range(min(args.steps + 1, steps_per_epoch))
    ]

    def fwd_bwd(data):
        loss = model.compute_loss(data)
        opt.zero_grad(set_to_none=True)
        loss.backward()

    def step(data):
        fwd_bwd(data)
        opt.step()

    counted = count_flops(lambda: fwd_bwd(batches[0]))  # also the warm-up
    analytic = train_step_flops(model, batches[0])
    opt.zero_grad(set_to_none=True)
    rates, times, cpu = [gemm_rate(args.gemm, args.gemm, args.gemm)], [], []
    for data in batches[1:] or batches:
        w, c = time.perf_counter(), time.process_time()
        step(data)
        times.append(time.perf_counter() - w)
        cpu.append(time.process_time() - c)
        rates.append(gemm_rate(args.gemm, args.gemm, args.gemm))
    rate = statistics.median(rates)
    step_s = statistics.median(cpu)  # CPU time: the machine is shared
    flops_step = counted
    return {
        "batch_size": batch_size,
        "steps_per_epoch": steps_per_epoch,
        "flops_per_step_counted": counted,
        "flops_per_step_analytic": analytic,
        "analytic_over_counted": None if analytic is None else analytic / counted,
        "step_s": times,
        "step_cpu_s": cpu,
        "median_step_s": step_s,
        "gemm_gflops_1t": rates,
        "rate_gflops": rate,
        "epoch_flops": flops_step * steps_per_epoch,
        "epoch_s": step_s * steps_per_epoch,
        "achieved_gflops": flops_step / step_s / 1e9,
        "achieved_fraction": flops_step / step_s / 1e9 / rate,
        "load_average": os.getloadavg(),
    }


def eval_part(model, split, spec, args) -> dict:
    test = split.test
    seen = spec.experiment.eval.seen_filter
    model.encoder.eval()
    model._sampler = None

    def run():  # the recipe's evaluation (as seqrec.experiment.evaluate_model runs it)
        return evaluate_model(model, spec.experiment, test)

    counted = count_flops(run)  # also the warm-up
    rates = [gemm_rate(args.gemm, args.gemm, args.gemm)]
    thin = [_thin_rate()]
    w, c = time.perf_counter(), time.process_time()
    run()
    wall, cpu = time.perf_counter() - w, time.process_time() - c
    rates.append(gemm_rate(args.gemm, args.gemm, args.gemm))
    thin.append(_thin_rate())
    rate = statistics.median(rates)
    floor = eval_floor_flops(model, test.histories().lengths)
    out = {
        "users": len(test),
        "seen_filter": seen,
        "flops_counted": counted,
        "wall_s": wall,
        "cpu_s": cpu,
        "gemm_gflops_1t": rates,
        "rate_gflops": rate,
        "achieved_fraction": counted / cpu / 1e9 / rate,
        "floor_flops": floor,
        "load_average": os.getloadavg(),
    }
    if floor is not None:
        out["floor_s"] = floor / (rate * 1e9)
        out["time_over_floor"] = cpu / out["floor_s"]
        out["thin_rate_gflops"] = statistics.median(thin)
        out["thin_floor_s"] = floor / (out["thin_rate_gflops"] * 1e9)
        out["time_over_thin_floor"] = cpu / out["thin_floor_s"]
    return out


def _thin_rate() -> float:
    """The fastest of the ``[25600, d] x [d, d']`` products the encoders run (one thread): the
    rate a d = 64 model's needed products could reach at best, elementwise work aside."""
    return max(gemm_rate(*THIN[k]) for k in THIN if k.startswith("[25600"))


# --- report -----------------------------------------------------------------------------
def _g(x: float | None, digits: int = 1) -> str:
    return "" if x is None else f"{x / 1e9:,.{digits}f}"


def _ratio(x: float | None) -> str:
    return "" if x is None else f"{x:.2f}"


def _pct(x: float | None) -> str:
    return "" if x is None else f"{100 * x:.0f}%"


def markdown(record: dict) -> str:
    m = record["machine"]
    lines = [
        "# Roofline: FLOPs, time and achieved share of the matmul rate (ML-1M)\n",
        f"Command: `{record['command']}`  ",
        "Data: `ml-1m-sasrec`, leave-last-out; each model at its ML-1M recipe (the "
        "reproduction-table row in the JSON), untrained weights  ",
        f"Protocol: {record['protocol']}  ",
        f"Hardware: {hardware_line(record['hardware'])}  ",
        f"Measured {record['created']}; 1-minute load average {record['load_range']} during the "
        "run (the machine was shared with other jobs: times and rates are process CPU seconds, "
        "the fractions use the rate measured in the same run; wall times are in the JSON)"
        + "".join(
            f"; {', '.join(m['models'])} measured again {m['created']} (`{m['command']}`, "
            f"load average {m['load_range']}, square rate {m['square_1t']:.1f} GFLOP/s)"
            for m in record.get("merges", [])
        )
        + "\n",
        "## The machine's fp32 matmul rate\n",
        "| product | threads | GFLOP/s |",
        "|---|---:|---:|",
        f"| {m['gemm']}³ | 1 | {m['square_1t']:.1f} |",
        f"| {m['gemm']}³ | 2 | {m['square_2t']:.1f} |",
    ]
    for k, v in m["thin_1t"].items():
        lines.append(f"| {k} | 1 | {v:.1f} |")
    lines += [
        "",
        "Rates per second of process CPU time, best of three (two threads: times two, the rate "
        "of both cores busy); the thin products are the shapes the models run.\n",
        "## Training (one thread) and full-ranking evaluation (one thread)\n",
        "Per model: FLOPs of a training step and an epoch as executed (flop counter; the "
        "analytic count's ratio to it where a formula exists), the median step time and the "
        "epoch time it implies, the one-thread square-GEMM rate measured between the steps, "
        "and the achieved share of it; then the same for one evaluation of all test users, "
        "with the FLOP floor (needed work / rate) where a formula exists; the thin floor is "
        "the same work at the rate of the fastest `[25600, d] x [d, d']` product, measured "
        "before and after the evaluation: with d = 64 no encoder product runs at the square "
        "rate, so eval / floor cannot reach 1 even with no elementwise work.\n",
        "| model | step GFLOP | analytic / counted | step CPU s | epoch steps | epoch GFLOP | "
        "epoch CPU s | rate GFLOP/s | train share | eval GFLOP | eval CPU s | eval share | "
        "floor GFLOP | floor s | eval / floor | eval / thin floor |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in record["models"].items():
        if "error" in r:
            lines.append(f"| {name} | error: {r['error']} |" + " |" * 14)
            continue
        t, e = r["train"], r.get("eval") or {}
        ratio = t["analytic_over_counted"]
        lines.append(
            f"| {name} | {_g(t['flops_per_step_counted'])} | "
            f"{'' if ratio is None else f'{ratio:.3f}'} | {t['median_step_s']:.2f} | "
            f"{t['steps_per_epoch']} | {_g(t['epoch_flops'], 0)} | {t['epoch_s']:.0f} | "
            f"{t['rate_gflops']:.1f} | {_pct(t['achieved_fraction'])} | "
            f"{_g(e.get('flops_counted'))} | "
            f"{'' if not e else format(e['cpu_s'], '.2f')} | {_pct(e.get('achieved_fraction'))} | "
            f"{_g(e.get('floor_flops'))} | "
            f"{'' if e.get('floor_s') is None else format(e['floor_s'], '.2f')} | "
            f"{'' if e.get('time_over_floor') is None else format(e['time_over_floor'], '.2f')} | "
            f"{_ratio(e.get('time_over_thin_floor'))} |"
        )
    lines += ["", record["notes"], "", "## Against the bars\n"]
    lines += summary(record["models"])
    return "\n".join(lines) + "\n"


def summary(models: dict) -> list[str]:
    """The issue's bars: training at >= 50% of the one-thread rate, evaluation within 1.5x of
    its FLOP floor (SASRec, LRURec, HSTU)."""
    out = []
    for name in ("sasrec", "lrurec", "hstu"):
        r = models.get(name)
        if not r or "error" in r:
            continue
        share = r["train"]["achieved_fraction"]
        line = f"- {name}: training at {100 * share:.0f}% of the rate (bar 50%: "
        line += "met" if share >= 0.5 else "not met"
        e = r.get("eval")
        if e and e.get("time_over_floor") is not None:
            ratio = e["time_over_floor"]
            line += f"); evaluation at {ratio:.2f}x its floor (bar 1.5x: "
            line += "met" if ratio <= 1.5 else "not met"
            if e.get("time_over_thin_floor") is not None:
                line += (
                    f"; {e['time_over_thin_floor']:.2f}x the floor at the fastest thin product's "
                    f"rate, {e['thin_rate_gflops']:.0f} GFLOP/s"
                )
        out.append(line + ")")
    return out


def main() -> None:
    args = parser().parse_args()
    if args.render:
        record = json.loads((OUT / f"{args.out_stem}.json").read_text())
        (OUT / f"{args.out_stem}.md").write_text(markdown(record))
        return
    retain_freed_memory()  # the seqrec command's allocator setting (seqrec.allocator)
    torch.set_num_threads(1)
    _register_formulas()
    t_start = time.perf_counter()
    loads = [os.getloadavg()[0]]
    machine = {
        "gemm": args.gemm,
        "square_1t": gemm_rate(args.gemm, args.gemm, args.gemm),
        "square_2t": gemm_rate(args.gemm, args.gemm, args.gemm, threads=2),
        "thin_1t": {k: gemm_rate(*v) for k, v in THIN.items()},
    }
    splits: dict = {}
    results: dict = {}
    for name in args.models.split(","):
        spec = _spec(name)
        exp = spec.experiment
        key = (repr(exp.data), repr(exp.split))
        if key not in splits:
            splits[key] = prepare_data(exp).split
        split = splits[key]
        model = build_model(exp)
        print(f"{name}: {spec.run_id}", flush=True)
        try:
            res = {"run": _run_label(name), "loss": model.train_config.loss}
            res["train"] = train_part(model, split, args)
            loads.append(os.getloadavg()[0])
            if not args.no_eval:
                res["eval"] = eval_part(model, split, spec, args)
                loads.append(os.getloadavg()[0])
        except Exception as exc:  # noqa: BLE001 - one model's failure is recorded, not fatal
            res = {"run": _run_label(name), "error": f"{type(exc).__name__}: {exc}"}
        results[name] = res
        print(
            json.dumps(
                {k: v for k, v in res.items() if k != "train"}
                | {"train_share": res.get("train", {}).get("achieved_fraction")},
                default=str,
            ),
            flush=True,
        )
    record = base_record(
        benchmark="roofline",
        data="ml-1m-sasrec, leave-last-out (each model's ML-1M recipe)",
        protocol=f"{args.steps} timed training steps per model after one counted warm-up step; "
        "one full-ranking evaluation after one counted warm-up evaluation; one thread; seed 0",
        machine=machine,
        models=results,
        load_range=f"{min(loads):.1f}-{max(loads):.1f}",
        load_averages=loads,
        wall_seconds=time.perf_counter() - t_start,
        notes="FLOPs: matrix products only (torch.utils.flop_counter; analytic formulas in the "
        "script's docstring). Epoch = steps_per_epoch x the median step (FLOPs of the counted "
        "step, CPU time of the timed ones), not a timed epoch. Share = FLOPs / CPU time / the "
        "one-thread "
        "square-GEMM rate measured between that model's steps (evaluation: before and after "
        "it). Floor = analytic needed FLOPs / that rate.",
    )
    if args.merge:
        merged = json.loads((OUT / f"{args.out_stem}.json").read_text())
        merged["models"].update(results)
        merged.setdefault("merges", []).append(
            {
                "models": list(results),
                "created": record["created"],
                "command": record["command"],
                "load_range": record["load_range"],
                "square_1t": machine["square_1t"],
                "machine": machine,
                "hardware": record["hardware"],
            }
        )
        record = merged
    print(write_report(OUT, args.out_stem, record, markdown(record)))


if __name__ == "__main__":
    main()
