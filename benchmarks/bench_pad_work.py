"""Training step and validation time with and without the work at PAD positions that no real
position reads, the same numbers either way:

* **TV-Rec's FFN at real positions only**: a block's outputs at PAD positions are zeroed before
  the next block reads them, so every block but the last runs its FFN there only
  (``FilterBlock.forward_rows``, the same dropout stream);
* **SASRec's blocks at real positions only** (training on CPU, reference layout): projections,
  norms and FFN run on the real positions, the attention on the whole ``[B, L]`` layout with
  its mask (``SASRecBlock.forward_rows``, the same dropout stream);
* **LRURec's PFFN at real positions only** (training on CPU): its outputs at PAD positions are
  never read (the next LRU zeroes its PAD inputs; no target sits there), so the fused PFFN
  computes the real rows only, its masks drawn for every row first;
* **HSTU's layers at real positions only** (training on CPU): norms, projections, gate and
  dropout run on the real positions, the attention over the whole layout with queries, keys
  and values 0 at PAD (``HSTULayer.forward_rows``, the same dropout stream);
* **scoring batches of window encoders budgeted at max_len**: the FMLP-Rec line pads every
  batch to ``max_len``, so a scoring batch holds ``EVAL_TOKENS / max_len`` rows; against the
  budget by the histories' own lengths.

Per reproduction run (``table:run``: its data, recipe and batch; untrained weights, seed 0, one
thread): the median of ``--steps`` interleaved training steps (forward, loss, backward, AdamW)
with the plain blocks and with the real-position ones, process CPU ms, and the fastest of
``--evals`` interleaved validations of all validation users (before: plain blocks and the
per-length budget; after: both changes), process CPU s, with whether their metrics are equal.

    .venv/bin/python benchmarks/bench_pad_work.py

Writes docs/results/pad_work.{json,md} (``--out-stem``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results"


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--runs",
        default="frequency:tvrec-sports,frequency:tvrec-beauty,frequency:bsarec-beauty,"
        "lsan:sasrec-d128-toys,lsan:sasrec-d128-beauty,lrurec:lrurec-video",
        help="table:run, comma-separated",
    )
    ap.add_argument("--steps", type=int, default=15, help="interleaved steps per variant")
    ap.add_argument("--evals", type=int, default=2, help="interleaved validations per variant")
    ap.add_argument("--out-stem", default="pad_work")
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
from _run_steps import run_steps  # noqa: E402

from seqrec.evaluation.results import base_record, write_report  # noqa: E402
from seqrec.experiment import evaluate_model  # noqa: E402
from seqrec.models import lrurec, tvrec  # noqa: E402
from seqrec.models.fmlprec import WindowEncoder  # noqa: E402
from seqrec.models.hstu import HSTUEncoder  # noqa: E402
from seqrec.models.sasrec import SASRecEncoder  # noqa: E402

TVREC_ROWS = tvrec._rows_path
SASREC_ROWS = SASRecEncoder._rows_path
LRUREC_ROWS = lrurec._real_rows
HSTU_ROWS = HSTUEncoder._rows_path


def _plain_blocks(on: bool) -> None:
    tvrec._rows_path = (lambda block: False) if on else TVREC_ROWS
    SASRecEncoder._rows_path = (lambda self, x: False) if on else SASREC_ROWS
    lrurec._real_rows = (lambda x, mask, training: None) if on else LRUREC_ROWS
    HSTUEncoder._rows_path = (lambda self, x, mask: False) if on else HSTU_ROWS


def one_run(table_run: str, steps: int, evals: int) -> dict:
    run = run_steps(ROOT, table_run, steps + 1)
    exp, split, model, batches, step = run.experiment, run.split, run.model, run.batches, run.step

    out: dict = {"run": table_run, "model": model.name, "dataset": exp.data.name}
    if model.name in ("tvrec", "sasrec", "lrurec", "hstu"):
        step(batches[0])
        cpu: dict[str, list[float]] = {"plain": [], "real_positions": []}
        for data in batches[1:]:
            for name in cpu:
                _plain_blocks(name == "plain")
                c = time.process_time()
                step(data)
                cpu[name].append(time.process_time() - c)
        _plain_blocks(False)
        out["step_ms"] = {k: statistics.median(v) * 1e3 for k, v in cpu.items()}
        out["step_ratio"] = out["step_ms"]["real_positions"] / out["step_ms"]["plain"]
    model.encoder.eval()
    ev: dict[str, list[float]] = {"before": [], "after": []}
    metrics = {}
    try:
        for _ in range(evals):
            for name in ev:
                _plain_blocks(name == "before")
                WindowEncoder.pads_to_max_len = name == "after"
                c = time.process_time()
                metrics[name] = evaluate_model(model, exp, split.valid).metrics
                ev[name].append(time.process_time() - c)
    finally:
        _plain_blocks(False)
        WindowEncoder.pads_to_max_len = True
    out["valid_users"] = len(split.valid)
    out["valid_s"] = {k: min(v) for k, v in ev.items()}
    out["valid_ratio"] = out["valid_s"]["after"] / out["valid_s"]["before"]
    out["metrics_equal"] = metrics["before"] == metrics["after"]
    return out


def markdown(record: dict) -> str:
    lines = [
        *timing_header("Work at PAD positions: training step and validation time", record),
        "Training step (TV-Rec, SASRec, LRURec, HSTU): plain blocks against the blocks at real positions only. "
        "Validation: the plain blocks and batches budgeted by the histories' lengths (before) "
        "against both changes (after).\n",
        "| run | dataset | step ms, plain | step ms, real positions | ratio | validation users | "
        "validation s, before | after | ratio | metrics equal |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in record["runs"]:
        s = r.get("step_ms")
        step = (
            f"{s['plain']:.1f} | {s['real_positions']:.1f} | {r['step_ratio']:.2f}"
            if s
            else "– | – | –"
        )
        lines.append(
            f"| {r['run']} | {r['dataset']} | {step} | {r['valid_users']:,} | "
            f"{r['valid_s']['before']:.2f} | {r['valid_s']['after']:.2f} | "
            f"{r['valid_ratio']:.2f} | {r['metrics_equal']} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    args = parser().parse_args()
    torch.set_num_threads(1)
    loads = [os.getloadavg()[0]]
    runs = []
    for run_id in args.runs.split(","):
        runs.append(one_run(run_id, args.steps, args.evals))
        loads.append(os.getloadavg()[0])
        print(runs[-1], flush=True)
    record = base_record(
        benchmark="pad_work",
        protocol=f"one thread, untrained weights, seed 0; median of {args.steps} interleaved "
        f"training steps, fastest of {args.evals} interleaved validations, process CPU time",
        runs=runs,
        load_range=f"{min(loads):.1f}-{max(loads):.1f}",
    )
    print(write_report(OUT, args.out_stem, record, markdown(record)))


if __name__ == "__main__":
    main()
