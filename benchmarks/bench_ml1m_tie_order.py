"""Does the order of same-second ratings change SASRec's and LRURec's ML-1M numbers?

``ml-1m.seq.tsv.xz`` (our ML-1M) is in time order, but its same-second ties come from the
BERT4Rec-VAE preprocessing and are in arbitrary order (see ``../shared/data/README.md``).
The SASRec preprocessing sorts each user's ``ratings.dat`` lines by time with a stable sort, so
its ties presumably keep the ``ratings.dat`` line order. ML-1M users rate many movies within
the same second, so the two orders disagree on many positions and targets (the benchmark counts
them) and checks that the file's order inside same-second groups is no better than a
random permutation of the ``ratings.dat`` order.

For users 1-2999 we have the raw ``ratings.dat`` lines (dataset ``ml-1m-ts``), so these orders
can be built for the same users and the same items (the items of the full 5-core, 3,416):

* ``file``: the order of ``ml-1m.seq.tsv.xz``;
* ``stable``: ``ratings.dat`` stably sorted by timestamp (the SASRec preprocessing);
* ``time_item``: sorted by (timestamp, MovieID), the LRURec code's preprocessing: its
  ``split_df`` sorts each user's rows by ``['timestamp', 'sid']``, where ``sid`` is the dense id
  it gave each MovieID by iterating a Python set of ints, which runs in ascending MovieID order
  here (a set of ints below its table size iterates in value order). So the LRURec paper's
  ML-1M ties are in ascending MovieID order.

The same model is trained on each order with the same seed (full cross-entropy, sliding
windows, d 64, 2 blocks, max_len 200, batch 128, validation every 2 epochs, patience 5, at most
``--epochs``), leave-last-out, full ranking, history filter: SASRec as in the SASRec benchmark's
best run (reference layout, dropout 0.1), LRURec (``--models lrurec``) as in the LRURec ML-1M
benchmark (dropout 0.2, weight decay 1e-2, gradient clipping 5).
Writes ``docs/results/ml1m_tie_order.{json,md}`` and the per-order result files.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_ml1m_tie_order.py --orders file,stable
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_ml1m_tie_order.py --models lrurec
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_ml1m_tie_order.py \
        --models lrurec --orders time_item --epochs 30
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_ml1m_tie_order.py \
        --models sasrec --orders time_item --epochs 40
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_ml1m_tie_order.py \
        --models lrurec --lrurec authors --orders file --epochs 30

``--lrurec authors`` trains the LRURec of the authors' code (embedding dropout before its
LayerNorm, no weight decay on biases and norms); the other LRURec rows are seqrec's LRURec
before 2026-11-30 (``LEGACY``).

A larger ``--epochs`` continues runs that stopped at the old limit (the epoch limit is run control,
so the checkpoint resumes).

Resumable: checkpoints under ``benchmarks/logs/runs/ml1m_tie_order_[lrurec_]<order>``.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import time
from pathlib import Path

import numpy as np
import torch

from seqrec.data.preprocess import PreprocessConfig, k_core, preprocess
from seqrec.data.sources import load
from seqrec.data.splits import leave_last_out
from seqrec.evaluation import evaluate
from seqrec.evaluation.results import base_record, result_record, write_result
from seqrec.models.lrurec import LEGACY, LRURec, LRURecConfig
from seqrec.models.sasrec import SASRec, SASRecConfig

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results"
METRICS = ["NDCG@10", "Recall@10", "NDCG@20", "MRR", "COV@10"]


def build_orders() -> tuple[dict, dict]:
    """The orders of users 1-2999 on the items of the full ML-1M 5-core."""
    full = load("ml-1m")
    kept_items = np.unique(k_core(full, 5).item)
    file_order = full.take((full.user <= 2999) & np.isin(full.item, kept_items),
                           note="users 1-2999, items of the full 5-core")
    raw = load("ml-1m-ts")
    stable = raw.take(np.isin(raw.item, kept_items), note="items of the full 5-core")
    # preprocess sorts stably by (user, timestamp), so pre-sorting by MovieID breaks its ties
    time_item = stable.take(np.lexsort((stable.item, stable.timestamp, stable.user)),
                            "ties by ascending MovieID (the LRURec code)")
    prepared = {"file": preprocess(file_order, PreprocessConfig(filter="none")),
                "stable": preprocess(stable, PreprocessConfig(filter="none")),
                "time_item": preprocess(time_item, PreprocessConfig(filter="none"))}
    return prepared, _compare(prepared)


def _raw_sequences(p) -> dict[int, list[int]]:
    """Raw user id -> raw item ids in the prepared (chronological) order."""
    inter = p.interactions
    out: dict[int, list[int]] = {}
    for u, i in zip(p.user_raw[inter.user], p.vocab.decode(inter.item), strict=True):
        out.setdefault(int(u), []).append(int(i))
    return out


def _tie_groups(stable, file_seq: dict, stable_seq: dict) -> dict:
    """How the file orders same-second ratings, against ``ratings.dat`` (stable) order.

    A tie group is a user's ratings sharing one timestamp (at least 2). If the file kept the
    ``ratings.dat`` order, every group would agree; if its order is arbitrary, a group of size
    n agrees with probability 1/n!, so the observed share is compared with the mean of 1/n!.
    """
    inter = stable.interactions
    time_of = {(int(u), int(i)): int(t) for u, i, t in
               zip(stable.user_raw[inter.user], stable.vocab.decode(inter.item), inter.timestamp,
                   strict=True)}
    sizes, agree = [], []
    for u, seq in stable_seq.items():
        groups: dict[int, list[int]] = {}
        for i in seq:
            groups.setdefault(time_of[(u, i)], []).append(i)
        file_groups: dict[int, list[int]] = {}
        for i in file_seq[u]:
            file_groups.setdefault(time_of[(u, i)], []).append(i)
        for t, g in groups.items():
            if len(g) > 1:
                sizes.append(len(g))
                agree.append(file_groups[t] == g)
    sizes_arr = np.asarray(sizes)
    # 1/20! is already ~4e-19: capping n keeps the rare huge groups cheap
    inv_fact = np.array([1.0 / math.factorial(min(n, 20)) for n in sizes])
    return {
        "tie_groups": len(sizes),
        "interactions_in_ties": int(sizes_arr.sum()),
        "mean_group_size": float(sizes_arr.mean()),
        "groups_in_stable_order": float(np.mean(agree)),
        "groups_in_stable_order_if_random": float(inv_fact.mean()),
    }


def _compare(prepared) -> dict:
    """Both orders must hold the same (user, item) pairs; how often do positions differ?"""
    a, b = (_raw_sequences(prepared[k]) for k in ("file", "stable"))
    if a.keys() != b.keys() or any(sorted(a[u]) != sorted(b[u]) for u in a):
        raise SystemExit("the two orders do not hold the same (user, item) pairs")
    users = sorted(a)
    c = _raw_sequences(prepared["time_item"])
    return {
        "time_item_vs_file": {
            "test_target_differs": float(np.mean([a[u][-1] != c[u][-1] for u in users])),
            "same_position_share": float(sum(x == y for u in users
                                             for x, y in zip(a[u], c[u], strict=True))
                                         / sum(len(a[u]) for u in users))},
        **_tie_groups(prepared["stable"], a, b),
        "users": len(users),
        "interactions": sum(len(a[u]) for u in users),
        "test_target_differs": float(np.mean([a[u][-1] != b[u][-1] for u in users])),
        "valid_target_differs": float(np.mean([a[u][-2] != b[u][-2] for u in users])),
        "same_position_share": float(sum(x == y for u in users for x, y in zip(a[u], b[u], strict=True))
                                     / sum(len(a[u]) for u in users)),
    }


def _finished(record: dict, epochs: int) -> bool:
    """A written result is final unless a larger ``--epochs`` asks to continue its run."""
    return record.get("stopped") == "patience" or (
        record.get("stopped") == "epochs" and record.get("epochs", 0) >= epochs)


def _model(name: str, args):
    """SASRec as in the SASRec benchmark's best run; LRURec as in the LRURec ML-1M benchmark."""
    common = dict(max_len=200, dim=64, n_blocks=2, loss="ce", lr=1e-3, batch_size=128,
                  epochs=args.epochs, patience=5, eval_every=2, seed=args.seed,
                  num_threads=args.threads, train_windows="sliding")
    if name == "sasrec":
        return SASRec(SASRecConfig(n_heads=1, dropout=0.1, layout="reference", weight_decay=0.0,
                                   **common))
    # seqrec's LRURec before 2026-11-30 trained the first runs here, so every order is compared
    # under it; --lrurec authors is the model of the authors' code (see LRURecConfig)
    legacy = LEGACY if args.lrurec == "legacy" else {}
    return LRURec(LRURecConfig(dropout=0.2, weight_decay=1e-2, grad_clip=5.0, **legacy, **common))


def _stem(name: str, order: str) -> str:
    # the SASRec runs came first and keep their original names
    if name == "sasrec":
        return f"ml1m_tie_order_{order}"
    return f"ml1m_tie_order_{name.replace('/authors', '_authors')}_{order}"


def _train(name: str, order: str, prep, args) -> None:
    split = leave_last_out(prep.sequences())
    model = _model(name, args)
    stem = _stem(name, order)
    t0 = time.perf_counter()
    model.fit(split.train, split.valid, checkpoint_dir=ROOT / "benchmarks" / "logs" / "runs" / stem,
              progress=False)
    lg, cfg = model.training_log, model.config
    results = {"valid": evaluate(model, split.valid, ks=(10, 20), seen_filter="history"),
               "test": evaluate(model, split.test, ks=(10, 20), seen_filter="history")}
    record = result_record(
        model=name, variant=f"ce, {order} order", dataset=f"ml-1m users 1-2999 ({order})",
        fingerprint=prep.fingerprint(), protocol="leave-last-out", results=results,
        seed=cfg.seed, config=cfg, epochs=lg.epochs_run, train_seconds=lg.train_seconds,
        best_epoch=lg.best_epoch, best_valid=lg.best_metric, stopped=lg.stopped,
        data={"users": prep.n_users, "items": prep.n_items,
              "interactions": len(prep.interactions),
              "preprocessing": list(prep.interactions.notes)},
        wall_seconds={"fit_this_process": time.perf_counter() - t0},
        torch_threads=args.threads, notes=f"tie order experiment: {order}",
    )
    write_result(record, OUT, stem=stem, metrics=METRICS)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--orders", default="file,stable")
    p.add_argument("--models", default="sasrec", help="comma-separated: sasrec, lrurec")
    p.add_argument("--epochs", type=int, default=40)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lrurec", default="legacy", choices=("legacy", "authors"),
                   help="LRURec as seqrec had it before 2026-11-30 (all runs of the table so far) "
                        "or as in the authors' code (dropout before the embedding LayerNorm, no "
                        "decay on biases and norms); authors rows are named lrurec/authors")
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    torch.set_num_threads(args.threads)

    prepared, stats = build_orders()
    logging.info("orders: %s", json.dumps(stats))
    for name in args.models.split(","):
        if name not in ("sasrec", "lrurec"):
            raise SystemExit(f"unknown model {name!r} (sasrec, lrurec)")
        row = f"{name}/authors" if name == "lrurec" and args.lrurec == "authors" else name
        for order in args.orders.split(","):
            if order not in prepared:
                raise SystemExit(f"unknown order {order!r} ({', '.join(prepared)})")
            path = OUT / f"{_stem(row, order)}.json"
            if not (path.exists() and _finished(json.loads(path.read_text()), args.epochs)):
                _train(row, order, prepared[order], args)

    # the summary shows every (model, order) result written so far, by this or earlier runs
    records = {(name, order): json.loads((OUT / f"{_stem(name, order)}.json").read_text())
               for name in ("sasrec", "lrurec", "lrurec/authors") for order in prepared
               if (OUT / f"{_stem(name, order)}.json").exists()}
    summary = base_record(benchmark="ml1m_tie_order", orders=stats,
                          models={f"{m}/{o}": {"metrics": r["metrics"], "ci95": r["ci95"],
                                               "epochs": r["epochs"],
                                               "best_epoch": r.get("best_epoch"),
                                               "stopped": r.get("stopped")}
                                  for (m, o), r in records.items()})
    (OUT / "ml1m_tie_order.json").write_text(json.dumps(summary, indent=2) + "\n")
    lines = ["# ML-1M users 1-2999: full-CE models under three orders of same-second ratings", "",
             f"Summary written by `{summary['command']}`, {summary['created']}; each row was "
             "trained by the command in its own result file (`ml1m_tie_order_[lrurec_[authors_]]<order>`).",
             "",
             f"{stats['users']} users, {stats['interactions']} interactions; `file` and `stable` put "
             f"a different item at the same position for {1 - stats['same_position_share']:.1%} "
             f"of interactions; the test target differs for {stats['test_target_differs']:.1%} "
             f"of users, the validation target for {stats['valid_target_differs']:.1%}. "
             f"{stats['interactions_in_ties']} interactions lie in {stats['tie_groups']} "
             f"same-second groups (mean size {stats['mean_group_size']:.1f}); the file keeps the "
             f"`ratings.dat` order in {stats['groups_in_stable_order']:.1%} of them, against "
             f"{stats['groups_in_stable_order_if_random']:.1%} expected from a random order. "
             "`time_item` (ties by ascending MovieID, the LRURec code's order) has the "
             f"file's test target for {1 - stats['time_item_vs_file']['test_target_differs']:.1%} "
             f"of users and the file's item at {stats['time_item_vs_file']['same_position_share']:.1%} "
             "of positions. Rows `lrurec` are seqrec's LRURec before 2026-11-30 (embedding "
             "dropout after its LayerNorm, weight decay on every parameter); rows "
             "`lrurec/authors` are the model of the authors' code.", "",
             "| model | order | valid NDCG@10 | test NDCG@10 (95% CI) | test Recall@10 | "
             "best epoch | epochs | stop |", "|---|---|---:|---:|---:|---:|---:|---|"]
    for (m, o), r in records.items():
        t, ci = r["metrics"]["test"], r["ci95"]["test"]["NDCG@10"]
        lines.append(f"| {m} | {o} | {r['metrics']['valid']['NDCG@10']:.4f} | "
                     f"{t['NDCG@10']:.4f} ({ci[0]:.4f}-{ci[1]:.4f}) | {t['Recall@10']:.4f} | "
                     f"{r.get('best_epoch')} | {r['epochs']} | {r.get('stopped')} |")
    (OUT / "ml1m_tie_order.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
