"""The batch SASRec's automatic sizing picks on each dataset of the defaults table (issue 19).

For the four datasets of ``configs/reproduce/defaults.toml`` (ML-100K, ml-latest-small, Beauty,
ML-1M; max_len 50, sliding windows, the table's splits), the training rows one epoch iterates
over, their mean targets, and the global batch of:

* the table's ``t1024`` rows (``batch_size = 0``, ``batch_targets = 1024``, no ``min_epoch_steps``);
* today's ``SASRecConfig`` default (``batch_size = 0``, ``batch_targets = 1024``,
  ``min_epoch_steps = 100``, ``auto_batch_max = 128``);
* the fixed 128 windows of the paper.

Where the default's batch equals a measured row's, the default trains exactly as that row did
(same seed, same batches), so the row's numbers are the default's. No training here.

    OMP_NUM_THREADS=1 PYTHONPATH=src .venv/bin/python benchmarks/diagnose_auto_batch.py

Needs ``../shared/data`` (Beauty, ML-1M). Writes docs/results/auto_batch.{json,md}.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from seqrec.evaluation.results import base_record, hardware_line
from seqrec.experiment import prepare_data
from seqrec.models.sasrec import SASRecConfig
from seqrec.models.torch_recommender import resolved_batch, targets_per_row, training_rows
from seqrec_lab.spec import load_table

ROOT = Path(__file__).resolve().parents[1]
ROWS = ("sasrec-ref-d02-p30-lr3-sliding-t1024-ml100k", "sasrec-ref-d02-p30-lr3-sliding-t1024-mls",
        "sasrec-ref-d02-p30-lr3-sliding-t1024-beauty", "sasrec-ref-d02-p30-lr3-sliding-t1024-ml1m")
AUTO = ("batch_size", "batch_targets", "min_epoch_steps", "auto_batch_max")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "results"))
    args = ap.parse_args()
    default = SASRecConfig()
    table = load_table("defaults", ROOT)
    found = []
    for spec in table.runs:
        if spec.run_id not in ROWS or spec.seed != 0:
            continue
        cfg = spec.experiment.model_config()
        today = dataclasses.replace(cfg, **{k: getattr(default, k) for k in AUTO})
        windows, _, rows = training_rows(prepare_data(spec.experiment).split.train, cfg)
        batches = {name: resolved_batch(c, windows, rows).batch_size
                   for name, c in (("t1024 row", cfg), ("default", today),
                                   ("fixed 128", dataclasses.replace(cfg, batch_size=128)))}
        r = {"dataset": spec.dataset, "row": spec.run_id, "rows": int(len(rows)),
             "mean targets": round(float(targets_per_row(windows, rows, cfg).mean()), 1),
             **{f"batch: {k}": v for k, v in batches.items()},
             "default steps per epoch": -(-len(rows) // batches["default"])}
        print(json.dumps(r))
        found.append(r)
    cmd = "OMP_NUM_THREADS=1 PYTHONPATH=src .venv/bin/python benchmarks/diagnose_auto_batch.py"
    rec = base_record(benchmark="diagnose_auto_batch", command=cmd, datasets=[r["dataset"] for r in found],
                      protocol="the defaults table's data and splits; max_len 50, sliding windows", seed=0,
                      default={k: getattr(default, k) for k in AUTO}, rows=found)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "auto_batch.json").write_text(json.dumps(rec, indent=2) + "\n")
    cols = ["rows", "mean targets", "batch: t1024 row", "batch: default", "batch: fixed 128",
            "default steps per epoch"]
    lines = ["# SASRec's automatic batch on the defaults table's datasets", "",
             f"Command: `{cmd}`  ", f"Hardware: {hardware_line(rec['hardware'])}  ",
             "Default: " + ", ".join(f"`{k} = {v}`" for k, v in rec["default"].items()), "",
             "| dataset | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    lines += [f"| {r['dataset']} | " + " | ".join(str(r[c]) for c in cols) + " |" for r in found]
    (out / "auto_batch.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out / 'auto_batch.md'}")


if __name__ == "__main__":
    main()
