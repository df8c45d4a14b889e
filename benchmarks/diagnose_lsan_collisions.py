"""Where LSAN's accuracy goes on Beauty: the quotient-remainder (QR) partners of the target item
(issue 15; the cause, looked for in the model's structure before any tuning).

With N = 2 base tables and m1 = 2, items ``v`` and ``v'`` with ``(v - 1) // 2 == (v' - 1) // 2``
share their row of the large (quotient) table and differ only by one of the two rows of the
small (remainder) table. Candidates are scored as ``f . mean_n e^n``, so for every user the two
partners' scores differ by the same ``f . (e^1_1 - e^1_0) / 2``: whenever the target scores high,
its partner does too and takes a place in the top 10.

For each test target this script measures, on the trained checkpoints of the ``lsan`` table
(best validation weights):

* how often the target's QR partner outranks it, against how often a *control* item does: the
  item two ids away, which shares the small-table row but not the large-table row;
* NDCG@10 / HR@10 as evaluated, and with the partner (resp. the control) taken out of the
  ranking: the gain is what the collision costs, against what removing any one item gains.

The same pairs are measured on SASRec (D = 128, same split), where ids ``2k`` / ``2k + 1``
share no parameter: its numbers show how much of the partner effect comes from the S3-Rec id
order (neighbouring ids are often bought by the same users) rather than from the sharing.

    OMP_NUM_THREADS=1 PYTHONPATH=src .venv/bin/python benchmarks/diagnose_lsan_collisions.py \
        --runs lsan-beauty,sasrec-d128-beauty

Reads the checkpoints under runs/reproduce/<key>/ (copied, never written); writes
docs/results/lsan_collisions.{json,md}.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from seqrec.evaluation.ranking import seen_positions
from seqrec.evaluation.results import base_record, hardware_line
from seqrec.registry import get_model
from seqrec_lab.harness import plan
from seqrec_lab.runner import prepared_data
from seqrec_lab.spec import load_table

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results"


def load_trained(spec, key: str, runs_dir: Path):
    """The run's best-validation weights, without training (a copy of its checkpoint)."""
    src = runs_dir / key
    if not (src / "last.pt").exists():
        raise SystemExit(f"{spec.run_id}: no checkpoint at {src}; run `seqrec reproduce "
                         f"lsan --runs {spec.run_id}` first")
    data = prepared_data(spec)
    _, model_cls = get_model(spec.model)
    cfg = dataclasses.replace(spec.experiment.model_config(), num_threads=1)
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("last.pt", "run.json"):
            shutil.copy(src / name, Path(tmp) / name)
        # a finished checkpoint returns its best weights; an unfinished one stops at once
        # (deadline already past) and restores its best weights too
        model = model_cls(cfg).fit(data.split.train, None, checkpoint_dir=tmp, progress=False,
                                   deadline=time.time())
    return model, data


def partner_of(items: np.ndarray, n_items: int) -> np.ndarray:
    """QR partner under m1 = 2 (ids 1..n): the other item of the pair (v - 1) // 2; 0 if none."""
    j = items - 1
    p = (j ^ 1) + 1
    return np.where(p <= n_items, p, 0)


def control_of(items: np.ndarray, n_items: int) -> np.ndarray:
    """Two ids away: same remainder row, another quotient row."""
    c = items + 2
    return np.where(c <= n_items, c, items - 2)


def dcg_at(rank: np.ndarray, k: int) -> np.ndarray:
    return np.where(rank < k, 1.0 / np.log2(rank + 2.0), 0.0)


def analyse(model, targets, chunk: int = 512) -> dict:
    n = model.n_items
    ranks, above_p, above_c, gap_p, gap_c = [], [], [], [], []
    for start in range(0, len(targets), chunk):
        idx = np.arange(start, min(start + chunk, len(targets)))
        hist = targets.histories(idx)
        scores = np.asarray(model.score(hist), dtype=np.float64)
        scores[:, 0] = -np.inf
        rows, cols = seen_positions(hist, "history")
        tgt = targets.items[idx]
        s_t = scores[np.arange(len(idx)), tgt].copy()
        scores[rows, cols] = -np.inf
        scores[np.arange(len(idx)), tgt] = s_t  # the target is never filtered
        rank = (scores > s_t[:, None]).sum(1)
        p, c = partner_of(tgt, n), control_of(tgt, n)
        s_p, s_c = scores[np.arange(len(idx)), p], scores[np.arange(len(idx)), c]
        sd = np.nanstd(np.where(np.isfinite(scores), scores, np.nan), axis=1)
        ranks.append(rank)
        above_p.append((p > 0) & (s_p > s_t))
        above_c.append(s_c > s_t)
        gap_p.append(np.where(np.isfinite(s_p) & (p > 0), np.abs(s_p - s_t) / sd, np.nan))
        gap_c.append(np.where(np.isfinite(s_c), np.abs(s_c - s_t) / sd, np.nan))
    rank = np.concatenate(ranks)
    ap, ac = np.concatenate(above_p), np.concatenate(above_c)
    out = {"targets": int(len(rank))}
    for label, r in (("", rank), (" without partner", rank - ap), (" without control", rank - ac)):
        out[f"NDCG@10{label}"] = float(dcg_at(r, 10).mean())
        out[f"HR@10{label}"] = float((r < 10).mean())
    top = rank < 20
    out["partner above target"] = float(ap.mean())
    out["control above target"] = float(ac.mean())
    out["partner above target, target in top 20"] = float(ap[top].mean()) if top.any() else None
    out["control above target, target in top 20"] = float(ac[top].mean()) if top.any() else None
    out["median score gap / score sd, partner"] = float(np.nanmedian(np.concatenate(gap_p)))
    out["median score gap / score sd, control"] = float(np.nanmedian(np.concatenate(gap_c)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--table", default="lsan")
    ap.add_argument("--runs", default="lsan-beauty,sasrec-d128-beauty")
    ap.add_argument("--runs-dir", default=str(ROOT / "runs" / "reproduce"))
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    torch.set_num_threads(1)
    table = load_table(args.table, ROOT)
    specs = table.select(run_ids=args.runs.split(","), seeds=[0])
    planned = plan(table, specs, Path(args.runs_dir), ROOT / "docs" / "reproduce" / "runs")
    rows = []
    for p in planned:
        spec, key = p.spec, p.key
        t0 = time.perf_counter()
        model, data = load_trained(spec, key, Path(args.runs_dir))
        stats = analyse(model, data.split.test)
        stats |= {"run": spec.run_id, "model": spec.model, "key": key,
                  "best_epoch": getattr(model.training_log, "best_epoch", None),
                  "seconds": round(time.perf_counter() - t0, 1)}
        print(json.dumps(stats, indent=1))
        rows.append(stats)
    cmd = "OMP_NUM_THREADS=1 PYTHONPATH=src .venv/bin/python benchmarks/diagnose_lsan_collisions.py --runs " + args.runs
    rec = base_record(benchmark="diagnose_lsan_collisions", command=cmd,
                      dataset=specs[0].dataset,
                      protocol="leave-last-out, test targets, history filter", seed=0, rows=rows)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "lsan_collisions.json").write_text(json.dumps(rec, indent=2) + "\n")
    cols = ["NDCG@10", "NDCG@10 without partner", "NDCG@10 without control", "HR@10",
            "HR@10 without partner", "HR@10 without control", "partner above target",
            "control above target", "partner above target, target in top 20",
            "control above target, target in top 20",
            "median score gap / score sd, partner", "median score gap / score sd, control"]
    lines = [
        "# LSAN on Beauty: the cost of the quotient-remainder partners", "",
        f"Command: `{cmd}`  ",
        f"Data: {specs[0].dataset}, leave-last-out test targets, full ranking, history filter; "
        f"seed 0; best-validation weights of each run's checkpoint.  ",
        f"Hardware: {hardware_line(rec['hardware'])}", "",
        "Partner: the item sharing the target's row of LSAN's large (quotient) table (ids 2k-1, 2k). "
        "Control: the item two ids away (same small-table row, another large-table row). "
        "'without X': the metric with X taken out of the ranking. For SASRec the same id pairs "
        "share no parameter.", "",
        "| metric | " + " | ".join(f"{r['run']} (key {r['key']}, best epoch {r['best_epoch']})" for r in rows) + " |",
        "|---|" + "---|" * len(rows),
    ]
    for c in cols:
        lines.append(f"| {c} | " + " | ".join(
            "–" if r.get(c) is None else f"{r[c]:.4f}" for r in rows) + " |")
    (out / "lsan_collisions.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out / 'lsan_collisions.md'}")


if __name__ == "__main__":
    main()
