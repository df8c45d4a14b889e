"""Shared pieces of the SASRec benchmarks: data preparation and one resumable train+test run."""

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
from seqrec.evaluation.results import result_record, write_result
from seqrec.models.neural_config import settings
from seqrec.models.sasrec import SASRec, SASRecConfig

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results"


def prepare(name: str):
    """Load a shared dataset, iterative 5-core, leave-last-out."""
    inter = load(name)
    prepared = preprocess(inter, PreprocessConfig(filter="k_core", min_item=5))
    split = leave_last_out(prepared.sequences())
    return prepared, split


def parser(description: str, **defaults) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--loss", default=defaults.get("loss", "ce"))
    p.add_argument("--max-len", type=int, default=defaults["max_len"])
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--blocks", type=int, default=2)
    p.add_argument("--heads", type=int, default=1)
    p.add_argument("--dropout", type=float, default=defaults.get("dropout", 0.2))
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--epochs", type=int, default=defaults.get("epochs", 200))
    p.add_argument("--patience", type=int, default=defaults.get("patience", 10))
    p.add_argument("--eval-every", type=int, default=defaults.get("eval_every", 1))
    p.add_argument("--layout", default="pre_ln")
    p.add_argument("--init", default="xavier", choices=("xavier", "normal"))
    p.add_argument("--attn-dropout", type=float, default=0.0)
    p.add_argument(
        "--attn-out-proj",
        action="store_true",
        help="attention output projection (as nn.MultiheadAttention / Dross)",
    )
    p.add_argument(
        "--positions",
        default="from_end",
        choices=("from_end", "from_start"),
        help="position numbering: the paper's (last item fixed) or from the oldest "
        "item of the window (right-padded codes such as Dross)",
    )
    p.add_argument(
        "--weight-decay",
        type=float,
        default=0.0,
        help="AdamW weight decay (0: the paper's Adam; the LRURec code uses 0.01)",
    )
    p.add_argument(
        "--grad-clip",
        type=float,
        default=0.0,
        help="gradient-norm clipping (0: none; the LRURec code clips at 5)",
    )
    p.add_argument(
        "--betas",
        default="0.9,0.98",
        help="Adam betas (0.9,0.98: the SASRec paper; 0.9,0.999: torch default, Dross)",
    )
    p.add_argument(
        "--windows",
        default="last",
        choices=("last", "sliding"),
        help="training windows: the most recent max_len transitions per user, or "
        "every transition once (long histories cut into windows)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--max-seconds", type=float, default=0.0, help="training time budget (0 = none)")
    p.add_argument(
        "--run-dir",
        default=None,
        help="checkpoint dir, default benchmarks/logs/runs/<stem> (resumes if it holds a run)",
    )
    p.add_argument("--stem", default=None)
    p.add_argument(
        "--report-only",
        action="store_true",
        help="do not train: test the best weights of the (possibly unfinished) run",
    )
    return p


def run(dataset: str, args, stem: str, notes: str = "") -> dict:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    prepared, split = prepare(dataset)
    prep_s = time.perf_counter() - t0
    cfg = settings(
        SASRecConfig,
        max_len=args.max_len,
        dim=args.dim,
        n_blocks=args.blocks,
        n_heads=args.heads,
        dropout=args.dropout,
        lr=args.lr,
        batch_size=args.batch_size,
        epochs=args.epochs,
        patience=args.patience,
        eval_every=args.eval_every,
        loss=args.loss,
        layout=args.layout,
        seed=args.seed,
        num_threads=args.threads,
        max_train_seconds=args.max_seconds,
        weight_decay=args.weight_decay,
        grad_clip=args.grad_clip,
        train_windows=args.windows,
        init=args.init,
        attn_dropout=args.attn_dropout,
        attn_out_proj=args.attn_out_proj,
        positions=args.positions,
        betas=tuple(float(b) for b in args.betas.split(",")),
    )
    run_dir = Path(args.run_dir or ROOT / "benchmarks" / "logs" / "runs" / stem)
    model = SASRec(cfg)
    t1 = time.perf_counter()
    if args.report_only:
        lg = _load_best(model, split.train, run_dir)
    else:
        model.fit(split.train, split.valid, checkpoint_dir=run_dir, progress=False)
        lg = model.training_log
    wall_fit = time.perf_counter() - t1
    results = {
        "valid": evaluate(model, split.valid, seen_filter="history"),
        "test": evaluate(model, split.test, seen_filter="history"),
    }
    from seqrec.models.torch_recommender import steps_per_epoch

    record = result_record(
        model="sasrec",
        variant=args.loss,
        dataset=dataset,
        fingerprint=prepared.fingerprint(),
        protocol="leave-last-out",
        results=results,
        seed=cfg.seed,
        config=cfg,
        epochs=lg.epochs_run,
        train_seconds=lg.train_seconds,
        data={
            "users": prepared.n_users,
            "items": prepared.n_items,
            "interactions": len(prepared.interactions),
            "preprocessing": list(prepared.interactions.notes),
        },
        best_epoch=lg.best_epoch,
        best_valid=lg.best_metric,
        stopped=lg.stopped,
        seconds_per_epoch=lg.train_seconds
        / max(lg.global_step, 1)
        * steps_per_epoch(split.train, cfg.parts[1], cfg.max_len),
        batch_share=lg.batch_share,
        global_step=lg.global_step,
        resumed_from_step=lg.resumed_from_step,
        wall_seconds={"prepare": prep_s, "fit_this_process": wall_fit},
        validation_log=str((run_dir / "validation.jsonl").relative_to(ROOT))
        if run_dir.is_relative_to(ROOT)
        else str(run_dir / "validation.jsonl"),
        torch_threads=args.threads,
        notes=notes,
    )
    if args.report_only:
        record["partial"] = "training not finished: best validated weights of the last checkpoint"
    log_file = run_dir / "validation.jsonl"
    if log_file.exists():  # the per-validation log travels with the result
        (OUT / f"{stem}.validation.jsonl").write_text(log_file.read_text())
    write_result(record, OUT, stem=stem, metrics=["NDCG@10", "Recall@10", "HR@10", "MRR", "COV@10"])
    logging.info("wrote %s: test %s", stem, json.dumps(record["metrics"]["test"]))
    return record


def _load_best(model, train, run_dir: Path):
    """Best validated weights (or the current ones) of the run's last checkpoint."""
    from seqrec.training.checkpoint import load_checkpoint
    from seqrec.training.trainer import TrainingLog

    ck = load_checkpoint(run_dir / "last.pt")
    model._remember_catalogue(train)
    model.encoder = model.build_encoder(train.n_items)
    model.encoder.load_state_dict(ck["best_state"] or ck["model"])
    model.encoder.eval()
    lg = dict(ck["log"])
    lg["history"] = json.loads(lg["history"])
    lg["stopped"] = "interrupted"
    return TrainingLog(**lg)
