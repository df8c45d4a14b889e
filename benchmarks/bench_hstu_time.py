"""What time information buys HSTU: rab^{p,t} against position-only rab, side by side.

Datasets with timestamps (``ml-latest-small``, shipped in the package; ``amazon-beauty``, the
Amazon 2014 Beauty 5-core with day timestamps), iterative 5-core, leave-last-out, full ranking
with the history filter, test histories include the validation item. Every variant has the same
config, seed and training-time budget; only the rab differs:

* ``pos``: position-only rab (``rab_time=False``; timestamps unused anywhere);
* ``pt``: rab^{p,t} with the write-up's pairwise ``|t_i - t_j|`` (``rab_time_query="self"``);
* ``pt_next``: rab^{p,t} with Meta's reference query time ``t_{i+1} - t_j`` (the last position
  uses the target's time, which the evaluation passes as the query time).

Training follows the HSTU paper's released configuration: sampled softmax with 128 shared
negatives, L2-normalised embeddings, temperature 0.05, AdamW lr 1e-3. Early stopping on
validation NDCG@10 (patience 5), best weights restored. Resumable: a variant whose result file
exists is skipped; a variant with a checkpoint continues from it.

    python benchmarks/bench_hstu_time.py --dataset ml-latest-small --max-len 200 --budget 480
    python benchmarks/bench_hstu_time.py --dataset amazon-beauty --max-len 50 --budget 1080
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

import torch

from seqrec.data.preprocess import PreprocessConfig, preprocess
from seqrec.data.sources import load
from seqrec.data.splits import leave_last_out
from seqrec.evaluation import evaluate
from seqrec.evaluation.results import base_record, result_record, write_result
from seqrec.models.hstu import HSTU, HSTUConfig

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results"
VARIANTS = {
    "pos": {"rab_time": False},
    "pt": {"rab_time": True, "rab_time_query": "self"},
    "pt_next": {"rab_time": True, "rab_time_query": "next"},
}
METRICS = ["NDCG@10", "HR@10", "MRR", "COV@10"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dataset", default="ml-latest-small")
    p.add_argument("--variants", default="pos,pt,pt_next")
    p.add_argument("--max-len", type=int, default=200)
    p.add_argument("--dim", type=int, default=50)
    p.add_argument("--blocks", type=int, default=2)
    p.add_argument("--heads", type=int, default=1)
    p.add_argument("--dropout", type=float, default=0.2)
    p.add_argument("--loss", default="sampled_softmax")
    p.add_argument("--negatives", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--epochs", type=int, default=200)
    p.add_argument("--patience", type=int, default=5)
    p.add_argument("--budget", type=float, default=600.0, help="training seconds per variant")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--summary-only", action="store_true",
                   help="only rebuild the side-by-side summary from existing result files")
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    torch.set_num_threads(args.threads)

    t0 = time.perf_counter()
    inter = load(args.dataset)
    prepared = preprocess(inter, PreprocessConfig(filter="k_core", min_item=5))
    split = leave_last_out(prepared.sequences())
    prep_s = time.perf_counter() - t0
    if split.train.timestamps is None:
        raise SystemExit(f"{args.dataset} has no timestamps: rab^{{p,t}} would equal position-only")
    data_info = {"users": prepared.n_users, "items": prepared.n_items,
                 "interactions": len(prepared.interactions),
                 "preprocessing": list(prepared.interactions.notes)}
    logging.info("%s: %s (prepared in %.1fs)", args.dataset, data_info, prep_s)

    records = {}
    for name in args.variants.split(","):
        stem = f"hstu_time_{args.dataset}_{name}"
        path = OUT / f"{stem}.json"
        if path.exists():
            records[name] = json.loads(path.read_text())
            logging.info("%s exists, skipped", path.name)
            continue
        if args.summary_only:
            continue
        cfg = HSTUConfig(
            max_len=args.max_len, dim=args.dim, n_blocks=args.blocks, n_heads=args.heads,
            dropout=args.dropout, loss=args.loss, n_negatives=args.negatives, lr=args.lr,
            batch_size=args.batch_size, epochs=args.epochs, patience=args.patience,
            seed=args.seed, num_threads=args.threads, max_train_seconds=args.budget,
            l2_norm=args.loss == "sampled_softmax", weight_decay=0.0,
            temperature=0.05 if args.loss == "sampled_softmax" else 1.0, **VARIANTS[name],
        )
        run_dir = ROOT / "benchmarks" / "logs" / "runs" / stem
        model = HSTU(cfg)
        t1 = time.perf_counter()
        model.fit(split.train, split.valid, checkpoint_dir=run_dir, progress=False)
        fit_s = time.perf_counter() - t1
        lg = model.training_log
        results = {"valid": evaluate(model, split.valid, seen_filter="history"),
                   "test": evaluate(model, split.test, seen_filter="history")}
        record = result_record(
            model="hstu", variant=name, dataset=args.dataset,
            fingerprint=prepared.fingerprint(), protocol="leave-last-out", results=results,
            seed=cfg.seed, config=cfg, epochs=lg.epochs_run, train_seconds=lg.train_seconds,
            data=data_info, best_epoch=lg.best_epoch, best_valid=lg.best_metric,
            stopped=lg.stopped, global_step=lg.global_step, torch_threads=args.threads,
            wall_seconds={"prepare": prep_s, "fit_this_process": fit_s},
            notes=f"rab variant {name!r}: {VARIANTS[name]}; query times = target timestamps",
        )
        write_result(record, OUT, stem=stem, metrics=METRICS)
        records[name] = json.loads(path.read_text())
        logging.info("%s: test %s", name, json.dumps(record["metrics"]["test"]))

    # side-by-side summary
    summary = base_record(
        benchmark="hstu_time", dataset=args.dataset, protocol="leave-last-out",
        ranking="full", seen_filter="history", data=data_info,
        variants={k: {"metrics": r["metrics"], "ci95": r["ci95"], "epochs": r["epochs"],
                      "best_epoch": r.get("best_epoch"), "train_seconds": r["train_seconds"],
                      "stopped": r.get("stopped")} for k, r in records.items()},
    )
    (OUT / f"hstu_time_{args.dataset}.json").write_text(json.dumps(summary, indent=2) + "\n")
    lines = [f"# HSTU on {args.dataset}: rab^{{p,t}} vs position-only\n",
             f"Leave-last-out, full ranking, history filter; {data_info['users']} users, "
             f"{data_info['items']} items. `{summary['command']}`\n",
             "| variant | valid NDCG@10 | test NDCG@10 (95% CI) | test HR@10 | test MRR | epochs "
             "(best) | train s | stop |", "|---|---:|---:|---:|---:|---:|---:|---|"]
    for k, r in records.items():
        t, v, ci = r["metrics"]["test"], r["metrics"]["valid"], r["ci95"]["test"]["NDCG@10"]
        lines.append(f"| {k} | {v['NDCG@10']:.4f} | {t['NDCG@10']:.4f} ({ci[0]:.4f}-{ci[1]:.4f})"
                     f" | {t['HR@10']:.4f} | {t['MRR']:.4f} | {r['epochs']} ({r.get('best_epoch')})"
                     f" | {r['train_seconds']:.0f} | {r.get('stopped')} |")
    (OUT / f"hstu_time_{args.dataset}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
