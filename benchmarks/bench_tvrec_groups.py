"""TV-Rec's last-position batches cut into groups of similar length, each on its own cut window.

``TVRecEncoder.forward(last_only=True)`` (every training step, and scoring) sorts a batch's rows
by the window positions they span and runs ``last_groups`` groups, each on the window cut to its
longest row; the filter's matrix is cut the same way, so the outputs are the whole window's up to
float rounding. Amazon prefixes are short (a few real items in a length-50 window), so most of
the window's elementwise work (masks, norms, residuals, the filter products) was on PAD.

Per reproduction run (``table:run``: its data, recipe and batch; untrained weights, seed 0, one
thread): the median of ``--steps`` interleaved training steps (forward, loss, backward, AdamW)
per variant, process CPU ms, and the fastest of ``--evals`` interleaved validations of all
validation users, process CPU s, with the largest difference of a validation metric between
the whole window and the library's default. Variants: ``window`` (one group: the whole window,
the FFN of every block but the last at the real positions), ``g4``, ``g8``, ``g16`` groups.
It also counts the share of the window's positions each variant runs over an epoch of the
run's training samples.

    .venv/bin/python benchmarks/bench_tvrec_groups.py

Writes docs/results/tvrec_groups.{json,md} (``--out-stem``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results"
VARIANTS = {"window": 1, "g4": 4, "g8": 8, "g16": 16}


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--runs",
        default="best:tvrec-d128-sports,frequency:tvrec-beauty,best:tvrec-d128-video",
        help="table:run, comma-separated",
    )
    ap.add_argument("--steps", type=int, default=15, help="interleaved steps per variant")
    ap.add_argument("--evals", type=int, default=2, help="interleaved validations per variant")
    ap.add_argument("--out-stem", default="tvrec_groups")
    return ap


if __name__ == "__main__":
    parser().parse_args()  # --help before the heavy imports

import os  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))
from _report import timing_header  # noqa: E402
from _run_steps import run_steps  # noqa: E402

from seqrec.evaluation.results import base_record, write_report  # noqa: E402
from seqrec.experiment import evaluate_model  # noqa: E402
from seqrec.models.fmlprec import prefix_samples  # noqa: E402
from seqrec.models.tvrec import TVRecEncoder  # noqa: E402

DEFAULT = TVRecEncoder.last_groups

ATTR = "last_groups"  # the encoder attribute that sets the number of groups


def positions_share(model, split, batch_size: int) -> dict:
    """:func:`shares_of` over the run's training samples (every non-empty prefix)."""
    _, _, span = prefix_samples(split.train, model.config.max_len, empty=False)  # spans >= 1
    return shares_of(span, batch_size, model.config.max_len)


def shares_of(span: np.ndarray, batch_size: int, max_len: int) -> dict:
    """Share of the window's positions that the groups run, over one epoch of samples of
    ``span`` positions each (from the first real item to the end of the window, at least 1)
    in a seeded random order (the whole window = 1), and the mean real positions a sample."""
    order = np.random.default_rng(0).permutation(len(span))
    batches = [
        np.sort(span[order[i : i + batch_size]])
        for i in range(0, len(order) - batch_size + 1, batch_size)
    ]
    full = len(batches) * batch_size * max_len
    share = {
        # one group runs the whole window, uncut
        name: 1.0
        if groups == 1
        else float(sum(len(g) * g[-1] for b in batches for g in np.array_split(b, groups)) / full)
        for name, groups in VARIANTS.items()
    }
    return {
        "mean_span": float(span.mean()),
        "real_share": float(span.mean()) / max_len,
    } | {"positions_share": share}


def one_run(
    table_run: str, steps: int, evals: int, attr: str = ATTR, shares_fn=positions_share
) -> dict:
    """Interleaved training steps and validations of ``table_run`` with the encoder's
    ``attr`` (its number of groups) set to each variant's."""
    run = run_steps(ROOT, table_run, steps + 1)
    exp, split, model, batches, step = run.experiment, run.split, run.model, run.batches, run.step
    shares = shares_fn(model, split, run.batch_size)
    enc = model.encoder
    default = getattr(enc, attr)
    step(batches[0])
    cpu: dict[str, list[float]] = {k: [] for k in VARIANTS}
    for data in batches[1:]:
        for name, groups in VARIANTS.items():
            setattr(enc, attr, groups)
            c = time.process_time()
            step(data)
            cpu[name].append(time.process_time() - c)
    enc.eval()
    compared = {"window": 1, "default": default}
    ev: dict[str, list[float]] = {k: [] for k in compared}
    metrics = {}
    for _ in range(evals):
        for name, groups in compared.items():
            setattr(enc, attr, groups)
            c = time.process_time()
            metrics[name] = evaluate_model(model, exp, split.valid).metrics
            ev[name].append(time.process_time() - c)
    setattr(enc, attr, default)
    step_ms = {k: statistics.median(v) * 1e3 for k, v in cpu.items()}
    return shares | {
        "run": table_run,
        "dataset": exp.data.name,
        "dim": model.config.dim,
        "batch": run.batch_size,
        "step_ms": step_ms,
        "step_ratio": {k: v / step_ms["window"] for k, v in step_ms.items()},
        "valid_users": len(split.valid),
        "valid_s": {k: min(v) for k, v in ev.items()},
        "valid_ratio": min(ev["default"]) / min(ev["window"]),
        "max_metric_diff": max(
            abs(metrics["window"][m] - metrics["default"][m]) for m in metrics["window"]
        ),
    }


def markdown(
    record: dict, title: str = "TV-Rec: last-position batches in groups of similar length"
) -> str:
    names = list(VARIANTS)
    lines = [
        *timing_header(title, record),
        f"Training step, process CPU ms (ratio to the whole window); validation of all "
        f"validation users, process CPU s, whole window against the default "
        f"({record['default_groups']} groups), and the largest difference of a validation "
        "metric between the two.\n",
        "| run | D | batch | "
        + " | ".join(f"step ms, {n}" for n in names)
        + " | validation users | validation s, window | default | ratio | max metric diff |",
        "|---|---:|---:|" + "---:|" * len(names) + "---:|---:|---:|---:|---:|",
    ]
    for r in record["runs"]:
        cells = [
            f"{r['step_ms'][n]:.0f}" + ("" if n == "window" else f" ({r['step_ratio'][n]:.2f})")
            for n in names
        ]
        lines.append(
            f"| {r['run']} | {r['dim']} | {r['batch']} | "
            + " | ".join(cells)
            + f" | {r['valid_users']:,} | {r['valid_s']['window']:.1f} | "
            f"{r['valid_s']['default']:.1f} | {r['valid_ratio']:.2f} | {r['max_metric_diff']:.1e} |"
        )
    lines += [
        "\nWindow positions each variant runs over one epoch of training samples (seeded "
        "random batches of the run's size; the whole window = 1), and the real positions.\n",
        "| run | mean real positions a sample | real | " + " | ".join(names) + " |",
        "|---|---:|---:|" + "---:|" * len(names),
    ]
    for r in record["runs"]:
        lines.append(
            f"| {r['run']} | {r['mean_span']:.2f} | {r['real_share']:.2f} | "
            + " | ".join(f"{r['positions_share'][n]:.2f}" for n in names)
            + " |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    args = parser().parse_args()
    torch.set_num_threads(1)
    loads = [os.getloadavg()[0]]
    runs = []
    for table_run in args.runs.split(","):
        runs.append(one_run(table_run, args.steps, args.evals))
        loads.append(os.getloadavg()[0])
        print(runs[-1], flush=True)
    record = base_record(
        benchmark="tvrec_groups",
        protocol=f"untrained weights, seed 0, one thread; median of {args.steps} interleaved "
        f"training steps per variant; fastest of {args.evals} interleaved validations",
        default_groups=DEFAULT,
        runs=runs,
        load_range=f"{min(loads):.1f}-{max(loads):.1f}",
    )
    print(write_report(OUT, args.out_stem, record, markdown(record)))


if __name__ == "__main__":
    main()
