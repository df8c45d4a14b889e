"""Cold items from their attributes: SASRec with ``item_attributes = "ids+attributes"`` against
the ID-only SASRec and two popularity baselines, on the item-cold split and the standard split.

For each dataset (default: amazon-beauty-s3rec and amazon-sports-s3rec, whose S3-Rec files
carry categories and brands):

* **item-cold split** (``item_cold_split``, ``--cold-share`` of the items held out of training
  entirely, seed ``--seed``): test HR@10 / NDCG@10 over all targets, over the targets that are
  held-out ("cold") items and over the others, for
  - ``pop``: training counts (a cold item has count 0, so it is never ranked above a seen one);
  - ``attr-pop``: every item scored by the mean, over its attribute values, of the training
    interactions with items carrying that value (cold and warm items on one scale);
  - ``pop+attr``: a warm item by its own count, a cold item by the mean, over its attribute
    values, of the count of an average warm item carrying that value (the expected count of an
    item with these attributes);
  - ``sasrec-id``: SASRec, ID only; ``sasrec-attr``: SASRec with the attribute item table;
  - ``sasrec-vec``: SASRec reading numeric item vectors instead of the attribute tokens
    (``ItemVocab.vectors``, the path of an item file's ``vector`` column). No embeddings
    computed elsewhere exist offline, so the vectors are a stand-in: a fixed random Gaussian
    projection (``--vector-dim``, seed ``--seed``) of each item's attribute values, summed and
    divided by the square root of their number. It checks the vector path end to end on real
    data; it says nothing about how good real text embeddings would be.
  The claim compares sasrec-attr's cold HR@10 with the strongest baseline's.
* **standard split** (leave-last-out): overall test NDCG@10 of sasrec-id and sasrec-attr.

Every SASRec arm: d 64, 2 blocks, max_len 50, full cross-entropy, the same ``--epochs``
(validation NDCG@10 every epoch selects the best epoch), one thread, seed ``--seed``; only
``item_attributes`` differs. Full ranking, history seen-filter, pessimistic ties.

Usage: ``OMP_NUM_THREADS=1 nice -n 10 python benchmarks/bench_cold_items.py --data
amazon-beauty-s3rec --epochs 8`` (writes ``docs/results/cold_items_<data>.{json,md}``;
``--merge`` joins the per-dataset JSON files into ``docs/results/cold_items.{json,md}``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="amazon-beauty-s3rec", help="dataset with item attributes")
    ap.add_argument("--epochs", type=int, default=8, help="epochs of every SASRec arm")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cold-share", type=float, default=0.1)
    ap.add_argument("--id-dropout", type=float, default=None, help="default: the config's")
    ap.add_argument(
        "--vector-dim", type=int, default=64, help="length of sasrec-vec's stand-in vectors"
    )
    ap.add_argument(
        "--splits", default="item-cold,standard", help="which splits to run (comma list)"
    )
    ap.add_argument(
        "--arms",
        default="baselines,sasrec-id,sasrec-attr",
        help="which rows to run (comma list of baselines, sasrec-id, sasrec-attr, sasrec-vec); "
        "separate "
        "processes can run separate arms into separate --out files, which --merge joins",
    )
    ap.add_argument(
        "--out", default=None, help="output stem (default docs/results/cold_items_<data>)"
    )
    ap.add_argument(
        "--merge",
        nargs="*",
        metavar="JSON",
        default=None,
        help="join these per-dataset JSON files into docs/results/cold_items.{json,md} and exit",
    )
    return ap


if __name__ == "__main__":
    parser().parse_args()  # --help (and a wrong argument) before the heavy imports below

import json
import time

import numpy as np
import torch

from seqrec.data.preprocess import PreprocessConfig, preprocess
from seqrec.data.sources import load
from seqrec.data.splits import item_cold_split, leave_last_out
from seqrec.evaluation import evaluate
from seqrec.evaluation.results import base_record, hardware_line
from seqrec.models.neural_config import settings
from seqrec.models.sasrec import SASRec, SASRecConfig

KS = (10,)
SASREC = dict(dim=64, n_blocks=2, max_len=50, loss="ce", num_threads=1, patience=0)


class FixedScores:
    """A recommender that gives every history the same item scores (a popularity table).
    Ties are broken at random (seeded): the evaluation's pessimistic ties would otherwise
    rank a target below every item of equal score, and attribute scores tie in whole blocks."""

    def __init__(self, scores: np.ndarray, seed: int = 0) -> None:
        scores = np.asarray(scores, np.float64)
        order = np.lexsort((np.random.default_rng(seed).random(len(scores)), scores))
        ranks = np.empty(len(scores), np.float64)
        ranks[order] = np.arange(len(scores))
        self.scores = ranks.astype(np.float32)  # a strict order; higher is better
        self.n_items = len(scores) - 1

    def score(self, histories, query_times=None) -> np.ndarray:
        out = np.repeat(self.scores[None], len(histories), 0)
        out[:, 0] = -np.inf
        return out


def attribute_popularity(attrs, counts: np.ndarray) -> tuple[np.ndarray, ...]:
    """``attr-pop``, ``pop+attr`` and ``new-first`` scores ``[n_items + 1]`` (module
    docstring)."""
    n = len(counts) - 1
    rows = (attrs.item >= 1) & (attrs.item <= n)
    item, kind, value = attrs.item[rows], attrs.kind[rows], attrs.attribute[rows]
    keys = np.asarray([f"{k}:{v}" for k, v in zip(kind, value, strict=True)])
    uniq, token = np.unique(keys, return_inverse=True)
    pairs = np.unique(np.stack([token, item]), axis=1)  # distinct (token, item)
    tok, it = pairs
    total = np.bincount(tok, weights=counts[it], minlength=len(uniq))
    warm = np.bincount(tok, weights=(counts[it] > 0).astype(float), minlength=len(uniq))
    per_item = total / np.maximum(warm, 1)

    def mean_over_items(per_token: np.ndarray) -> np.ndarray:
        s = np.bincount(it, weights=per_token[tok], minlength=n + 1)
        c = np.bincount(it, minlength=n + 1)
        return np.where(c > 0, s / np.maximum(c, 1), 0.0)

    attr_pop = mean_over_items(total)
    expected = mean_over_items(per_item)
    pop_attr = np.where(counts > 0, counts, expected)
    # items never seen in training first (by attr-pop), then the seen ones by count
    new_first = np.where(counts > 0, counts, attr_pop + counts.max() + 1)
    attr_pop[0] = pop_attr[0] = new_first[0] = 0.0
    return attr_pop, pop_attr, new_first


def metrics(model, split, targets) -> dict:
    out = {}
    parts = {"all": targets}
    if split.cold_items is not None:
        parts["cold"] = split.cold_targets(targets, True)
        parts["warm"] = split.cold_targets(targets, False)
    for name, part in parts.items():
        if len(part) == 0:
            continue
        res = evaluate(model, part, ks=KS, seen_filter="history")
        out[name] = {
            "targets": len(part),
            "HR@10": float(res.metrics["HR@10"]),
            "NDCG@10": float(res.metrics["NDCG@10"]),
        }
    return out


def stand_in_vectors(attrs, n_items: int, args) -> np.ndarray:
    """``[n_items, --vector-dim]``: per item, the sum of one fixed Gaussian vector per
    attribute value it carries over the square root of their number (NaN rows: none)."""
    rng = np.random.default_rng([args.seed, 0xEC7])
    keys = sorted({(str(k), int(v)) for k, v in zip(attrs.kind, attrs.attribute, strict=True)})
    basis = rng.normal(size=(len(keys), args.vector_dim)).astype(np.float32)
    code = {k: i for i, k in enumerate(keys)}
    out = np.zeros((n_items, args.vector_dim), np.float32)
    count = np.zeros(n_items, np.int64)
    for item, kind, value in zip(attrs.item, attrs.kind, attrs.attribute, strict=True):
        if 1 <= item <= n_items:
            out[item - 1] += basis[code[(str(kind), int(value))]]
            count[item - 1] += 1
    out /= np.sqrt(np.maximum(count, 1))[:, None]
    out[count == 0] = np.nan
    return out


def with_vectors(split, vectors: np.ndarray):
    """``split`` whose training sequences' vocabulary has ``vectors`` and no attribute tokens
    (what the model reads its item table from; the targets are unchanged)."""
    import dataclasses

    vocab = dataclasses.replace(split.train.vocab, attributes=None, vectors=vectors)
    return dataclasses.replace(split, train=dataclasses.replace(split.train, vocab=vocab))


def train_sasrec(split, attrs_mode: str, args) -> tuple[SASRec, dict]:
    extra = {} if args.id_dropout is None else {"id_dropout": args.id_dropout}
    cfg = settings(
        SASRecConfig,
        **SASREC,
        epochs=args.epochs,
        seed=args.seed,
        item_attributes=attrs_mode,
        **extra,
    )
    model = SASRec(cfg)
    torch.set_num_threads(1)
    c0, w0 = time.process_time(), time.perf_counter()
    model.fit(split.train, split.valid, progress=False)
    info = {
        "train_cpu_s": round(time.process_time() - c0, 1),
        "train_wall_s": round(time.perf_counter() - w0, 1),
        "epochs": model.epochs_trained,
        "best_epoch": model.training_log.best_epoch,
        "best_valid": model.training_log.best_metric,
        "item_attributes": attrs_mode,
        "id_dropout": model.config.id_dropout if attrs_mode != "none" else None,
    }
    return model, info


def run(args, save) -> dict:
    inter = load(args.data)
    seqs = preprocess(inter, PreprocessConfig()).sequences()
    attrs = seqs.vocab.attributes
    record = base_record(
        benchmark="cold_items",
        data=args.data,
        users=len(seqs),
        items=int(seqs.n_items),
        interactions=int(len(seqs.items)),
        attribute_kinds=None if attrs is None else attrs.kinds(),
        protocol=(
            "item-cold split (share of items held out of training entirely) and leave-last-out; "
            "full ranking, history seen-filter, pessimistic ties"
        ),
        sasrec=SASREC | {"epochs": args.epochs, "seed": args.seed},
        seed=args.seed,
        machine_note="2 CPU cores shared with other jobs; one torch thread per run",
        results={},
    )
    for split_name in [s.strip() for s in args.splits.split(",") if s.strip()]:
        if split_name == "item-cold":
            split = item_cold_split(seqs, args.cold_share, args.seed)
        elif split_name == "standard":
            split = leave_last_out(seqs)
        else:
            raise SystemExit(f"unknown split {split_name!r}: item-cold or standard")
        rows = {}
        arms = {a.strip() for a in args.arms.split(",")}
        if split.cold_items is not None and "baselines" in arms:
            counts = split.train.item_counts().astype(np.float64)
            attr_pop, pop_attr, new_first = attribute_popularity(attrs, counts)
            for name, scores in (
                ("pop", counts),
                ("attr-pop", attr_pop),
                ("pop+attr", pop_attr),
                ("new-first", new_first),
            ):
                rows[name] = {"test": metrics(FixedScores(scores, args.seed), split, split.test)}
                print(split_name, name, json.dumps(rows[name]["test"]), flush=True)
        for name, mode in (
            ("sasrec-id", "none"),
            ("sasrec-attr", "ids+attributes"),
            ("sasrec-vec", "ids+attributes"),
        ):
            if name not in arms:
                continue
            arm_split = split
            if name == "sasrec-vec":
                arm_split = with_vectors(split, stand_in_vectors(attrs, seqs.n_items, args))
            model, info = train_sasrec(arm_split, mode, args)
            if mode != "none" and args.id_dropout is not None:
                name = f"sasrec-attr-d{args.id_dropout:g}"  # a variant beside the default
            rows[name] = {"test": metrics(model, arm_split, arm_split.test), "training": info}
            print(split_name, name, json.dumps(rows[name]), flush=True)
            record["results"][split_name] = {"split_info": split.info, "rows": rows}
            save(record)  # partial results survive an interrupted run
        record["results"][split_name] = {"split_info": split.info, "rows": rows}
    return record


def _fmt(x):
    return "-" if x is None else f"{x:.4f}"


ORDER = ("pop", "attr-pop", "pop+attr", "new-first", "sasrec-id", "sasrec-attr", "sasrec-vec")


def combine(records: list[dict]) -> list[dict]:
    """One record per dataset and epoch budget from records of separate arms (``--arms``) of
    it (runs of one dataset at two budgets stay apart)."""
    by: dict[tuple, dict] = {}
    for r in records:
        key = (r["data"], r["sasrec"]["epochs"])
        d = by.setdefault(key, {**r, "dataset": r["data"], "results": {}, "commands": []})
        d["commands"] += r.get("commands", [r["command"]])
        for split, part in r["results"].items():
            tgt = d["results"].setdefault(split, {"split_info": part["split_info"], "rows": {}})
            tgt["rows"].update(part["rows"])
    for d in by.values():
        for part in d["results"].values():
            rows = part["rows"]
            part["rows"] = {k: rows[k] for k in ORDER if k in rows} | {
                k: v for k, v in sorted(rows.items()) if k not in ORDER
            }
    return list(by.values())


def markdown(records: list[dict]) -> str:
    records = combine(records)
    lines = ["# Cold items from their attributes", ""]
    first = records[0]
    commands = [c for r in records for c in r["commands"]]
    lines += [
        "Commands (each with `OMP_NUM_THREADS=1 nice -n 10`, from the repository root): `"
        + "`, `".join(commands)
        + "`",
        "",
        f"Protocol: {first['protocol']}. SASRec: {json.dumps(first['sasrec'])} (epochs: per "
        "dataset below); the SASRec "
        "arms differ only in `item_attributes` (`sasrec-attr`: the default `id_dropout`, "
        "0.25; `sasrec-attr-dX`: `id_dropout` X; `sasrec-vec`: `ids+attributes` reading "
        "stand-in numeric item vectors, a fixed random projection of the attribute values, "
        "instead of the attribute tokens). Cold hits = HR@10 x cold targets. Hardware: "
        f"{hardware_line(first['hardware'])}; {first['machine_note']}.",
        "",
    ]
    for r in records:
        lines += [
            f"## {r['data']}, {r['sasrec']['epochs']} epochs ({r['users']:,} users, "
            f"{r['items']:,} items, "
            f"{r['interactions']:,} interactions; attribute kinds {r['attribute_kinds']})",
            "",
            f"SASRec epochs per arm: {r['sasrec']['epochs']}.",
            "",
        ]
        cold = r["results"].get("item-cold")
        if cold:
            info = cold["split_info"]
            lines += [
                f"Item-cold split: {info['cold_items']} items held out "
                f"(share {info['cold_share']}), {info['cold_test_targets']} cold test targets.",
                "",
                "| model | HR@10 cold | NDCG@10 cold | HR@10 warm | NDCG@10 warm | HR@10 all "
                "| NDCG@10 all | train CPU s | best epoch |",
                "|---|---|---|---|---|---|---|---|---|",
            ]
            for name, row in cold["rows"].items():
                t = row["test"]
                tr = row.get("training", {})
                lines.append(
                    f"| {name} | {_fmt(t.get('cold', {}).get('HR@10'))} "
                    f"| {_fmt(t.get('cold', {}).get('NDCG@10'))} "
                    f"| {_fmt(t.get('warm', {}).get('HR@10'))} "
                    f"| {_fmt(t.get('warm', {}).get('NDCG@10'))} "
                    f"| {_fmt(t['all']['HR@10'])} | {_fmt(t['all']['NDCG@10'])} "
                    f"| {tr.get('train_cpu_s', '-')} | {tr.get('best_epoch', '-')} |"
                )
            attr = cold["rows"].get("sasrec-attr", {}).get("test", {}).get("cold", {}).get("HR@10")
            for names, what in (
                (("pop", "attr-pop", "pop+attr"), "popularity baseline"),
                (("pop", "attr-pop", "pop+attr", "new-first"), "baseline, new-first included"),
            ):
                have = [b for b in names if b in cold["rows"]]
                if attr is None or not have:
                    continue
                base = max((cold["rows"][b]["test"]["cold"]["HR@10"], b) for b in have)
                if base[0] > 0:
                    ratio = f"{attr / base[0]:.2f}x"
                else:
                    ratio = "no hits for either" if attr == 0 else "the baseline has none"
                n = cold["rows"]["sasrec-attr"]["test"]["cold"]["targets"]
                lines += [
                    "",
                    f"Cold HR@10: sasrec-attr {attr:.4f} ({round(attr * n)} hits) vs the "
                    f"strongest {what} ({base[1]}) {base[0]:.4f} ({round(base[0] * n)} hits): "
                    f"{ratio}.",
                ]
            lines.append("")
        std = r["results"].get("standard")
        if std:
            lines += [
                "Standard split (leave-last-out):",
                "",
                "| model | HR@10 | NDCG@10 | train CPU s | best epoch |",
                "|---|---|---|---|---|",
            ]
            for name, row in std["rows"].items():
                t, tr = row["test"]["all"], row["training"]
                lines.append(
                    f"| {name} | {t['HR@10']:.4f} | {t['NDCG@10']:.4f} | {tr['train_cpu_s']} "
                    f"| {tr['best_epoch']} |"
                )
            a = std["rows"].get("sasrec-attr", {}).get("test", {}).get("all", {}).get("NDCG@10")
            b = std["rows"].get("sasrec-id", {}).get("test", {}).get("all", {}).get("NDCG@10")
            if a is not None and b:
                lines += ["", f"NDCG@10 sasrec-attr / sasrec-id: {a / b:.3f}."]
            lines.append("")
    return "\n".join(lines)


def main() -> None:
    args = parser().parse_args()
    results = ROOT / "docs" / "results"
    if args.merge is not None:
        paths = args.merge or sorted(str(p) for p in (results / "cold_items").glob("*.json"))
        records = [json.loads(Path(p).read_text()) for p in paths]
        combined = combine(records)
        (results / "cold_items.json").write_text(json.dumps(combined, indent=2) + "\n")
        (results / "cold_items.md").write_text(markdown(records))
        print(f"wrote {results / 'cold_items.md'} from {len(records)} files")
        return
    stem = Path(args.out) if args.out else results / f"cold_items_{args.data}"
    stem.parent.mkdir(parents=True, exist_ok=True)

    def save(record: dict) -> None:
        stem.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
        stem.with_suffix(".md").write_text(markdown([record]))

    save(run(args, save))
    print(f"wrote {stem}.md")


if __name__ == "__main__":
    main()
