"""Full cross-entropy on CPU: the working tree's loss against the same loss at a git revision.

Times ``seqrec.training.losses.full_ce_loss`` forward + backward of the working tree and of
``--baseline REV`` (its ``losses.py`` read with ``git show``) in one process, the two calls
interleaved, one thread, d 64, float32, at the catalogue sizes of the datasets we hold, with and
without the output bias (LRURec has one, SASRec none) and label smoothing (the default of SASRec
and TV-Rec). Cells are median process CPU milliseconds; the ratio is new / baseline; the last
columns are the largest differences between the two losses and gradients, relative to the
baseline's largest magnitude (the same function up to float rounding).

    .venv/bin/python benchmarks/bench_ce_passes.py --baseline d353d39

Writes docs/results/ce_passes.{json,md} (``--out-stem``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results"
# (catalogue, items, rows, bias, smoothing)
CASES = (
    ("ML-1M", 3416, 25600, False, 0.0),
    ("ML-1M", 3416, 25600, False, 0.1),
    ("ML-1M", 3416, 25600, True, 0.0),
    ("ML-1M", 3416, 25600, True, 0.1),
    ("Video Games", 23715, 256, False, 0.1),
    ("Video Games", 23715, 6400, False, 0.1),
)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline", required=True, help="git revision of the loss to compare with")
    ap.add_argument("--reps", type=int, default=9, help="interleaved calls of each per case")
    ap.add_argument("--out-stem", default="ce_passes")
    return ap


if __name__ == "__main__":
    parser().parse_args()  # --help before the heavy imports

import importlib.util  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))
from _report import timing_header  # noqa: E402

from seqrec.evaluation.results import base_record, write_report  # noqa: E402
from seqrec.training import losses  # noqa: E402


def baseline_module(rev: str):
    """``losses.py`` as it was at ``rev``, imported under another name."""
    source = subprocess.run(
        ["git", "show", f"{rev}:src/seqrec/training/losses.py"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location("losses_baseline", f.name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    os.unlink(f.name)
    return module


def measure(old, items: int, rows: int, bias: bool, smoothing: float, reps: int) -> dict:
    g = torch.Generator().manual_seed(0)
    h = (0.3 * torch.randn(1, rows, 64, generator=g)).requires_grad_()
    w = (0.3 * torch.randn(items + 1, 64, generator=g)).requires_grad_()
    b = (0.1 * torch.randn(items + 1, generator=g)).requires_grad_() if bias else None
    t = torch.randint(1, items + 1, (1, rows), generator=g)
    params = [x for x in (h, w, b) if x is not None]
    times: dict[str, list[float]] = {"baseline": [], "new": []}
    out = {}
    for _ in range(reps):
        for name, module in (("baseline", old), ("new", losses)):
            c = time.process_time()
            loss = module.full_ce_loss(h, t, w, b, label_smoothing=smoothing)
            grads = torch.autograd.grad(loss, params)
            times[name].append(time.process_time() - c)
            out[name] = (loss.detach(), grads)
    (l0, g0), (l1, g1) = out["baseline"], out["new"]
    grad_diff = max(float((a - c).abs().max() / c.abs().max()) for a, c in zip(g1, g0, strict=True))
    ms = {k: sorted(v)[len(v) // 2] * 1e3 for k, v in times.items()}
    return {
        "ms": ms,
        "ratio": ms["new"] / ms["baseline"],
        "loss_rel_diff": float((l1 - l0).abs() / l0.abs()),
        "grad_rel_diff": grad_diff,
    }


def markdown(record: dict) -> str:
    lines = [
        *timing_header("Full cross-entropy on CPU: fewer passes over the logits", record),
        f"Forward + backward of `full_ce_loss`, median process CPU ms, the working tree against "
        f"revision `{record['baseline']}` (`{record['baseline_commit'][:12]}`), calls "
        "interleaved in one process.\n",
        "| catalogue | items | rows | output bias | smoothing | baseline ms | new ms | new / "
        "baseline | loss rel. diff | grad rel. diff |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in record["cases"]:
        lines.append(
            f"| {r['catalogue']} | {r['items']:,} | {r['rows']:,} | "
            f"{'yes' if r['bias'] else 'no'} | {r['smoothing']} | {r['ms']['baseline']:.0f} | "
            f"{r['ms']['new']:.0f} | {r['ratio']:.3f} | {r['loss_rel_diff']:.1e} | "
            f"{r['grad_rel_diff']:.1e} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    args = parser().parse_args()
    torch.set_num_threads(1)
    old = baseline_module(args.baseline)
    commit = subprocess.run(
        ["git", "rev-parse", args.baseline], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()
    loads = [os.getloadavg()[0]]
    cases = []
    for name, items, rows, bias, smoothing in CASES:
        case = {"catalogue": name, "items": items, "rows": rows, "bias": bias}
        case |= {"smoothing": smoothing} | measure(old, items, rows, bias, smoothing, args.reps)
        cases.append(case)
        loads.append(os.getloadavg()[0])
        print(cases[-1], flush=True)
    record = base_record(
        benchmark="ce_passes",
        protocol=f"one thread, d 64, float32; median of {args.reps} interleaved calls of each "
        "(process CPU time)",
        baseline=args.baseline,
        baseline_commit=commit,
        cases=cases,
        load_range=f"{min(loads):.1f}-{max(loads):.1f}",
    )
    print(write_report(OUT, args.out_stem, record, markdown(record)))


if __name__ == "__main__":
    main()
