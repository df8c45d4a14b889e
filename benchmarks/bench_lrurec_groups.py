"""LRURec's batches cut into groups of similar length, each on its own cut window.

``LRUEncoder.forward`` (every training step) sorts a batch's rows by the window positions they
span and runs ``length_groups`` groups, each on the window cut to its longest row: PAD inputs
keep the recurrent state at zero and the other layers are position-wise, so the outputs at the
real positions are the whole window's up to float rounding. Amazon windows are short (a few
real items in a length-50 window), so most of the LRU layers' work (input and output products,
the scan, masks, norms) was on PAD.

Per reproduction run (``table:run``: its data, recipe and batch; untrained weights, seed 0, one
thread): the median of ``--steps`` interleaved training steps (forward, loss, backward, AdamW)
per variant, process CPU ms, and the fastest of ``--evals`` interleaved validations of all
validation users, process CPU s, with the largest difference of a validation metric between
the whole window and the library's default (evaluation encodes the last position, batched by
length already: it should not move). Variants: ``window`` (one group, cut where every row is
PAD), ``g4``, ``g8``, ``g16`` groups. It also counts the share of the window's positions each
variant runs over an epoch of the run's training windows.

    .venv/bin/python benchmarks/bench_lrurec_groups.py

Writes docs/results/lrurec_groups.{json,md} (``--out-stem``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--runs",
        default="lrurec:lrurec-video,lrurec:lrurec-ml1m",
        help="table:run, comma-separated",
    )
    ap.add_argument("--steps", type=int, default=15, help="interleaved steps per variant")
    ap.add_argument("--evals", type=int, default=1, help="interleaved validations per variant")
    ap.add_argument("--out-stem", default="lrurec_groups")
    return ap


if __name__ == "__main__":
    parser().parse_args()  # --help before the heavy imports

import os  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_tvrec_groups import OUT, markdown, one_run, shares_of  # noqa: E402

from seqrec.evaluation.results import base_record, write_report  # noqa: E402
from seqrec.models.lrurec import LRUEncoder  # noqa: E402
from seqrec.training.rows import targets_per_row  # noqa: E402


def window_shares(model, split, batch_size: int) -> dict:
    """:func:`bench_tvrec_groups.shares_of` over the run's training windows; a window's span
    is its input positions (its targets)."""
    windows, _, rows = model.training_rows(split.train)
    max_len = model.config.max_len
    span = np.maximum(targets_per_row(windows, rows, model.train_config, max_len), 1)
    return shares_of(span, batch_size, max_len)


def main() -> None:
    args = parser().parse_args()
    torch.set_num_threads(1)
    loads = [os.getloadavg()[0]]
    runs = []
    for table_run in args.runs.split(","):
        runs.append(one_run(table_run, args.steps, args.evals, "length_groups", window_shares))
        loads.append(os.getloadavg()[0])
        print(runs[-1], flush=True)
    record = base_record(
        benchmark="lrurec_groups",
        protocol=f"untrained weights, seed 0, one thread; median of {args.steps} interleaved "
        f"training steps per variant; fastest of {args.evals} interleaved validations",
        default_groups=LRUEncoder.length_groups,
        runs=runs,
        load_range=f"{min(loads):.1f}-{max(loads):.1f}",
    )
    title = "LRURec: batches in groups of similar length"
    print(write_report(OUT, args.out_stem, record, markdown(record, title)))


if __name__ == "__main__":
    main()
