"""LSAN model size and CPU inference latency against SASRec on Amazon Beauty (S3-Rec 5-core)
(issue 15, must-shows 2 and 4; accuracy at each m1 comes from ``configs/reproduce/lsan.toml``).

Models, all at D = 128 and max_len = 50, built on the Beauty catalogue (12,101 items, the
categories of its item-attribute table) and **not trained**: size does not depend on the
weights, and latency does not either (same shapes, same operations).

* LSAN with m1 in {2, 3, 4} (N = 2 base tables, 1 twin-attention layer, H = 2 heads per
  branch, kernel 5, context = (previous category, category); Beauty's S3-Rec file has no
  timestamps, so ``time_slots="none"``), and the same with the 24 hour slots (the context table
  of a dataset with times, e.g. Yelp) for reference;
* SASRec at D = 128 as in its paper (2 blocks, 1 head), and with 1 block.

Size: trainable parameters; embedding memory (float32 bytes of the item-side tables: LSAN's base
tables, SASRec's item table; LSAN's context table and both position tables are listed apart);
saved-model size (``Recommender.save``: ``state.npz`` + ``model.json`` + ``vocab.npz``).

Latency: one call of ``score`` + top-10 (history items excluded) for batch 1 (one user) and
batch 256 (users drawn from the test targets), single thread, median over repeats with the
models interleaved so that load from other processes hits all alike; wall and process CPU time.
LSAN scores against a candidate table composed from its base tables (by default through the
input pipeline under each item's own category, ``candidates="input"``; the row "mean
candidates, recompose" uses the context-free mean of the base embeddings); the composed table is kept
between calls while the weights do not change (``cache_candidates``), which costs the memory of
a full table while scoring. The row "recompose candidates" rebuilds it at every call (no
full-size table is ever held).

    OMP_NUM_THREADS=1 PYTHONPATH=src .venv/bin/python benchmarks/bench_lsan_size.py

Writes docs/results/lsan_size.{json,md}.
"""

from __future__ import annotations

import argparse
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "docs" / "results"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=30, help="calls at batch 1 (batch 256: 1/3)")
    p.add_argument("--render", action="store_true", help="only rewrite the .md from the .json")
    return p


if __name__ == "__main__":
    parser().parse_args()  # --help (and a wrong argument) before the heavy imports below

import dataclasses
import json
import statistics
import tempfile
import time

import numpy as np
import torch

from seqrec.data.preprocess import PreprocessConfig, preprocess
from seqrec.data.sources import load
from seqrec.data.splits import leave_last_out
from seqrec.evaluation.results import base_record, hardware_line
from seqrec.models.lsan import LSAN, LSANConfig, side_information
from seqrec.models.neural_config import settings
from seqrec.models.sasrec import SASRec, SASRecConfig

DATASET = "amazon-beauty-s3rec"


def build(model_cls, cfg, train):
    """An untrained model on ``train``'s catalogue (what ``fit`` builds before its first step)."""
    model = model_cls(cfg)
    model._remember_catalogue(train)
    if isinstance(model, LSAN):  # categories do not depend on the time slots
        model._categories = side_information(train, dataclasses.replace(cfg, time_slots="none"))
    torch.manual_seed(0)
    model.encoder = model.build_encoder(train.n_items).eval()
    return model


def sizes(model) -> dict:
    enc = model.encoder
    params = sum(p.numel() for p in enc.parameters())
    if isinstance(model, LSAN):
        item = sum(p.numel() for p in enc.tables.parameters())
        ctx = sum(
            p.numel()
            for n, p in enc.named_parameters()
            if n.startswith(("context", "prev_emb", "cur_emb", "slot_emb"))
        )
        rows = [t.num_embeddings for t in enc.tables]
    else:
        item, ctx, rows = enc.item_emb.weight.numel(), 0, [enc.item_emb.num_embeddings]
    pos = enc.pos_emb.weight.numel() if enc.pos_emb is not None else 0
    with tempfile.TemporaryDirectory() as tmp:
        model.save(tmp)
        files = {f.name: f.stat().st_size for f in Path(tmp).iterdir()}
    return {
        "parameters": params,
        "item_embedding_parameters": item,
        "table_rows": rows,
        "item_embedding_bytes": 4 * item,
        "context_parameters": ctx,
        "position_parameters": pos,
        "other_parameters": params - item - ctx - pos,
        "saved_bytes": sum(files.values()),
        "saved_files": files,
    }


def top10(model, hist) -> np.ndarray:
    scores = model.score(hist)
    scores[hist.row_ids, hist.items] = -np.inf
    return np.argpartition(-scores, 10, axis=1)[:, :10]


def latency(models: dict, hists: dict, repeats: dict) -> dict:
    out = {name: {} for name in models}
    for batch, hist in hists.items():
        for model in models.values():  # warm-up
            top10(model, hist)
        wall = {name: [] for name in models}
        cpu = {name: [] for name in models}
        for _ in range(repeats[batch]):
            for name, model in models.items():
                w0, c0 = time.perf_counter(), time.process_time()
                top10(model, hist)
                wall[name].append(time.perf_counter() - w0)
                cpu[name].append(time.process_time() - c0)
        for name in models:
            out[name][f"batch{batch}"] = {
                "wall_ms": 1e3 * statistics.median(wall[name]),
                "cpu_ms": 1e3 * statistics.median(cpu[name]),
                "wall_ms_per_user": 1e3 * statistics.median(wall[name]) / batch,
                "repeats": repeats[batch],
            }
    return out


def markdown(record: dict) -> str:
    rows = record["models"]
    ref = rows["SASRec (2 blocks)"]["size"]["parameters"]
    lines = [
        "# LSAN vs SASRec on Amazon Beauty (S3-Rec): size and CPU latency (untrained weights)",
        "",
        f"Data: `{DATASET}` ({record['n_items']:,} items, {record['n_categories']} category "
        "classes), "
        "D = 128, max_len = 50. Weights are untrained: size and latency do not depend on them. "
        "Accuracy at each m1 is in the `lsan` reproduction table (`configs/reproduce/lsan.toml`).",
        "",
        "| model | parameters | % of SASRec | item-embedding rows | item-embedding memory | "
        "context params | saved model |",
        "|---|---:|---:|---|---:|---:|---:|",
    ]
    for name, r in rows.items():
        s = r["size"]
        lines.append(
            f"| {name} | {s['parameters']:,} | {100 * s['parameters'] / ref:.1f}% | "
            f"{' + '.join(f'{m:,}' for m in s['table_rows'])} | "
            f"{s['item_embedding_bytes'] / 2**20:.2f} MiB | {s['context_parameters']:,} | "
            f"{s['saved_bytes'] / 2**20:.2f} MiB |"
        )
    lines += [
        "",
        "Latency of `score` + top-10 (history excluded), one thread, median (wall / process CPU):",
        "",
        "| model | batch 1: ms | batch 256: ms per call | batch 256: ms per user |",
        "|---|---:|---:|---:|",
    ]
    for name, r in rows.items():
        if r["latency"] is None:
            continue
        b1, b256 = r["latency"]["batch1"], r["latency"]["batch256"]
        lines.append(
            f"| {name} | {b1['wall_ms']:.2f} / {b1['cpu_ms']:.2f} | "
            f"{b256['wall_ms']:.1f} / {b256['cpu_ms']:.1f} | "
            f"{b256['wall_ms_per_user']:.3f} |"
        )
    lsan, sas = rows["LSAN m1=2"], rows["SASRec (2 blocks)"]
    lines += [
        "",
        f"LSAN at m1 = 2 has {100 * lsan['size']['parameters'] / ref:.0f}% of SASRec's "
        "parameters (the paper: about 60%) and half its item-embedding memory; one user's "
        f"top-10 costs {lsan['latency']['batch1']['cpu_ms']:.1f} ms of CPU against "
        f"{sas['latency']['batch1']['cpu_ms']:.1f} ms (batch 256: "
        f"{lsan['latency']['batch256']['cpu_ms']:.0f} vs "
        f"{sas['latency']['batch256']['cpu_ms']:.0f} ms): LSAN's one layer is cheaper than "
        "SASRec's two blocks, but its input embedding (context attention over the base "
        "embeddings and the fusion MLP at every position) is not a plain lookup. "
        "Recomposing the candidate table at every call instead of keeping it costs "
        f"{rows['LSAN m1=2, recompose candidates']['latency']['batch1']['cpu_ms']:.0f} ms "
        "at batch 1 through the input pipeline (the default candidates), "
        f"{rows['LSAN m1=2, mean candidates, recompose']['latency']['batch1']['cpu_ms']:.0f}"
        " ms with the context-free mean.",
    ]
    lines += [
        "",
        "Saved model = `state.npz` + `model.json` + `vocab.npz` (raw ids); both carry a "
        "popularity vector, LSAN also its item -> category buffer (int64).",
        "",
        f"Hardware: {hardware_line(record['hardware'])}. "
        "The machine is shared with other jobs: latency is indicative, CPU time is the "
        "steadier figure.",
        "",
        f"Command: `OMP_NUM_THREADS={record['threads']} PYTHONPATH=src .venv/bin/python "
        f"{record['command']}` (seed 0 for the untrained weights and the drawn users).",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    args = parser().parse_args()
    if args.render:
        md = markdown(json.loads((OUT / "lsan_size.json").read_text()))
        (OUT / "lsan_size.md").write_text(md)
        return
    torch.set_num_threads(args.threads)
    seqs = preprocess(load(DATASET), PreprocessConfig(filter="none")).sequences()
    split = leave_last_out(seqs)
    train = split.train
    common = {"dim": 128, "max_len": 50, "num_threads": args.threads, "eval_batch_size": 256}
    configs = {
        f"LSAN m1={m}": (LSAN, settings(LSANConfig, m1=m, time_slots="none", **common))
        for m in (2, 3, 4)
    }
    configs["LSAN m1=2, recompose candidates"] = (
        LSAN,
        settings(LSANConfig, m1=2, time_slots="none", cache_candidates=False, **common),
    )
    configs["LSAN m1=2, mean candidates, recompose"] = (
        LSAN,
        settings(
            LSANConfig, m1=2, time_slots="none", candidates="mean", cache_candidates=False, **common
        ),
    )
    configs["LSAN m1=2, 24 hour slots"] = (LSAN, settings(LSANConfig, m1=2, **common))
    configs["SASRec (2 blocks)"] = (SASRec, settings(SASRecConfig, n_blocks=2, n_heads=1, **common))
    configs["SASRec (1 block)"] = (SASRec, settings(SASRecConfig, n_blocks=1, n_heads=1, **common))
    models = {name: build(cls, cfg, train) for name, (cls, cfg) in configs.items()}
    rng = np.random.default_rng(0)
    test = split.test
    hists = {
        1: test.histories(np.array([int(rng.integers(len(test)))])),
        256: test.histories(rng.choice(len(test), 256, replace=False)),
    }
    timed = {n: m for n, m in models.items() if "hour" not in n}  # Beauty has no times to use
    lat = latency(timed, hists, {1: args.repeats, 256: max(3, args.repeats // 3)})
    record = base_record(
        benchmark="lsan_size",
        dataset=DATASET,
        n_items=int(train.n_items),
        n_categories=int(models["LSAN m1=2"].encoder.n_classes),
        threads=args.threads,
        trained=False,
        protocol="untrained weights; latency of score + top-10 with the history filter",
        models={
            n: {
                "config": json.loads(json.dumps(vars(m.config), default=str)),
                "size": sizes(m),
                "latency": lat.get(n),
            }
            for n, m in models.items()
        },
    )
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "lsan_size.json").write_text(json.dumps(record, indent=2) + "\n")
    (OUT / "lsan_size.md").write_text(markdown(record))
    print((OUT / "lsan_size.md").read_text())


if __name__ == "__main__":
    main()
