"""One step of the rolling-window update protocol: update a trained model on new events
(``seqrec.update.update_model``) against a full retrain, both tested on the events after them.

The log (default ml-latest-small, which ships with seqrec and has real timestamps), unfiltered,
is cut by global time at the quantiles
``--cuts`` (default 0.8, 0.9): events before the first cut are the *old* data, those between
the cuts the *new* data, those after the second cut the *test* window. For each seed:

* **base**: the model trained on the old data (only the items and users seen there);
* **update**: the base model updated on the new events (``update_model``: new items and users
  appended, ``--update-epochs`` epochs, ``--replay``), its CPU time measured;
* **retrain**: the same model trained from scratch on old + new data, its CPU time measured.

Test targets: each user's first event in the test window, with their whole history before the
second cut as input (full ranking, history seen-filter), where the target item is known to the
models (seen before the second cut); targets that are items first seen in the new data are also
reported apart ("new-item targets"). Every model trains for a fixed number of epochs (no
validation: the protocol has no validation window), on one thread.

Usage: ``OMP_NUM_THREADS=1 python benchmarks/bench_update.py [--data ml-latest-small]
[--seeds 0 1 2]``; writes ``docs/results/update_step_<data>.{json,md}``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="ml-latest-small", help="dataset name or file")
    ap.add_argument("--model", default="sasrec")
    ap.add_argument("--epochs", type=int, default=20, help="epochs of the base and the retrain")
    ap.add_argument("--update-epochs", type=int, default=3)
    ap.add_argument("--replay", default="all", help="'all', 'none' or a share")
    ap.add_argument("--cuts", type=float, nargs=2, default=[0.8, 0.9])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a model setting (dim=64); repeatable",
    )
    ap.add_argument(
        "--out", default=None, help="output stem (default docs/results/update_step_<data>)"
    )
    return ap


if __name__ == "__main__":
    parser().parse_args()  # --help (and a wrong argument) before the heavy imports below

import json
import statistics
import time

import numpy as np
import torch

from seqrec.config import parse_value
from seqrec.data.preprocess import PreprocessConfig, preprocess
from seqrec.data.sequences import Sequences, Targets
from seqrec.data.sources import load
from seqrec.evaluation.results import base_record, hardware_line
from seqrec.models.neural_config import settings
from seqrec.registry import get_model
from seqrec.serving.histories import UserHistories
from seqrec.update import update_model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _update_common import metrics, raw_columns  # noqa: E402


def fit(model_name, flat, inter, seed):
    """A model trained on ``inter`` (all of it: no held-out part), its CPU seconds."""
    config_cls, model_cls = get_model(model_name)
    prepared = preprocess(inter, PreprocessConfig(filter="none"))
    model = model_cls(settings(config_cls, **{**flat, "seed": seed}))
    t0 = time.process_time()
    model.fit(prepared.sequences(), None, progress=False)
    seconds = time.process_time() - t0
    model.user_histories = UserHistories.from_prepared(prepared)
    return model, seconds


def test_targets(model, histories_raw, targets_raw):
    """Targets in the model's ids: each user's history before the test window + target."""
    rows, keep = [], []
    for t, (hist, target) in enumerate(zip(histories_raw, targets_raw, strict=True)):
        ids, _ = model.vocab.encode_known(hist)
        tid, unknown = model.vocab.encode_known([target])
        if unknown or not len(ids):
            continue
        rows.append(np.concatenate([ids, tid]))
        keep.append(t)
    seqs = Sequences.from_lists(rows, n_items=model.n_items)
    lengths = seqs.lengths
    return Targets(seqs, np.arange(len(rows)), lengths - 1, seqs.items[seqs.offsets[1:] - 1]), keep


def main() -> None:
    args = parser().parse_args()
    torch.set_num_threads(1)
    flat = {"epochs": args.epochs, "num_threads": 1, "patience": 0}
    for item in args.set:
        key, _, value = item.partition("=")
        flat[key.strip()] = parse_value(value.strip())
    inter = load(args.data)  # raw ids; each part below is prepared as a log of its own
    users, items = raw_columns(inter, items_as_text=False)
    t1, t2 = np.quantile(inter.timestamp, args.cuts)
    old, new, test = (
        inter.timestamp < t1,
        (inter.timestamp >= t1) & (inter.timestamp < t2),
        inter.timestamp >= t2,
    )
    old_items = set(items[old].tolist())
    before = set(items[old | new].tolist())
    # test targets: each user's first test-window event; history = everything before t2
    order = np.lexsort((inter.timestamp, users))
    histories_raw, targets_raw = [], []
    by_user: dict[str, list] = {}
    for i in order:
        by_user.setdefault(users[i], []).append(i)
    for rows in by_user.values():
        hist = [items[i] for i in rows if inter.timestamp[i] < t2]
        first = next((items[i] for i in rows if test[i]), None)
        if hist and first is not None and first in before:
            histories_raw.append(hist)
            targets_raw.append(first)
    new_item_targets = [t for t, target in enumerate(targets_raw) if target not in old_items]
    runs = []
    for seed in args.seeds:
        base, base_s = fit(args.model, flat, inter.take(old, "old part"), seed)
        print(f"seed {seed}: base trained in {base_s:.1f} CPU s", flush=True)
        t0 = time.process_time()
        report = update_model(
            base,
            inter.take(new, "new part"),
            replay=args.replay,
            seed=seed,
            fit_options={"epochs": args.update_epochs, "progress": False},
        )
        update_s = time.process_time() - t0
        print(f"seed {seed}: updated in {update_s:.1f} CPU s", flush=True)
        retrain, retrain_s = fit(args.model, flat, inter.take(old | new, "old + new"), seed)
        upd_targets, keep_u = test_targets(base, histories_raw, targets_raw)
        re_targets, keep_r = test_targets(retrain, histories_raw, targets_raw)
        assert keep_u == keep_r, "the updated and the retrained model know the same items"
        pos = {t: k for k, t in enumerate(keep_u)}
        new_sub = [pos[t] for t in new_item_targets if t in pos]
        run = {
            "seed": seed,
            "cpu_seconds": {"base": base_s, "update": update_s, "retrain": retrain_s},
            "update_over_retrain_cpu": update_s / retrain_s,
            "update": {
                "all": metrics(base, upd_targets),
                "new_items": metrics(base, upd_targets, new_sub),
            },
            "retrain": {
                "all": metrics(retrain, re_targets),
                "new_items": metrics(retrain, re_targets, new_sub),
            },
            "report": report.lines(),
        }
        run["ndcg_kept"] = run["update"]["all"]["NDCG@10"] / run["retrain"]["all"]["NDCG@10"]
        runs.append(run)
        print(
            json.dumps({k: run[k] for k in ("seed", "cpu_seconds", "ndcg_kept")}, default=float),
            flush=True,
        )
    out = (
        Path(args.out)
        if args.out
        else ROOT / "docs" / "results" / f"update_step_{Path(args.data).stem}"
    )
    record = base_record(
        benchmark="update_step",
        data=args.data,
        model=args.model,
        settings=flat,
        update_epochs=args.update_epochs,
        replay=args.replay,
        cuts=args.cuts,
        protocol="global time cuts: old < q1 <= new < q2 <= test; first test event per user",
        counts={
            "old": int(old.sum()),
            "new": int(new.sum()),
            "test_targets": len(targets_raw),
            "new_item_targets": len(new_item_targets),
            "items_old": len(old_items),
            "items_new": len(before) - len(old_items),
        },
        runs=runs,
        mean={
            "update_over_retrain_cpu": statistics.mean(r["update_over_retrain_cpu"] for r in runs),
            "ndcg_kept": statistics.mean(r["ndcg_kept"] for r in runs),
        },
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(record, indent=2, default=float))
    lines = [
        f"# One update step against a full retrain: {args.model} on {args.data}",
        "",
        f"Command: `{record['command']}`  ",
        f"Hardware: {hardware_line(record['hardware'])}; one thread; the machine was shared "
        "with other jobs, so CPU times are noisy (each ratio is within one run).  ",
        f"Protocol: {record['protocol']} (cuts at the {args.cuts} quantiles of time); "
        f"full ranking, history filter; base and retrain {args.epochs} epochs, update "
        f"{args.update_epochs} epochs with replay={args.replay}; settings {flat}.  ",
        f"Data: {record['counts']}.",
        "",
        "| seed | base CPU s | update CPU s | retrain CPU s | update / retrain | NDCG@10 update "
        "| NDCG@10 retrain | kept | HR@10 new-item targets: update / retrain |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in runs:
        c = r["cpu_seconds"]
        lines.append(
            f"| {r['seed']} | {c['base']:.1f} | {c['update']:.1f} | {c['retrain']:.1f} | "
            f"{r['update_over_retrain_cpu']:.1%} | {r['update']['all']['NDCG@10']:.4f} | "
            f"{r['retrain']['all']['NDCG@10']:.4f} | {r['ndcg_kept']:.1%} | "
            f"{r['update']['new_items']['HR@10']:.4f} / {r['retrain']['new_items']['HR@10']:.4f} "
            f"({r['update']['new_items']['targets']} targets) |"
        )
    lines += ["", "What the update said (first seed):", ""]
    lines += [f"- {line}" for line in runs[0]["report"]]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
