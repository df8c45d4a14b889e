"""``seqrec index RUN``: build the approximate item index into a saved artifact."""

from __future__ import annotations

import argparse
import time

import numpy as np

from seqrec.errors import ConfigError


def add_index_args(p: argparse.ArgumentParser) -> None:
    from seqrec.models.ann import IndexParams

    d = IndexParams()
    p.add_argument(
        "artifact",
        help="a saved model: the run directory seqrec train printed (runs/shop-sasrec) or its model/ folder",
    )
    p.add_argument("--m", type=int, default=d.m, help=f"HNSW neighbours per node (default {d.m})")
    p.add_argument(
        "--ef-construction",
        type=int,
        default=d.ef_construction,
        help=f"HNSW candidate list while building (default {d.ef_construction})",
    )
    p.add_argument(
        "--ef-search",
        type=int,
        default=d.ef_search,
        help=f"HNSW candidate list while searching: higher is closer to exact and slower "
        f"(default {d.ef_search})",
    )
    p.add_argument(
        "--space",
        choices=["l2", "ip"],
        default=d.space,
        help="l2: Euclidean graph over the inner product reduced by one coordinate; ip: a "
        f"graph on the inner product itself (default {d.space}; docs/decisions/ann-library.md)",
    )
    p.add_argument(
        "--threads", type=int, default=0, help="threads of the build (default 0: every core)"
    )
    p.add_argument(
        "--check",
        type=int,
        default=1000,
        metavar="N",
        help="measure recall@10 against exact ranking on up to N stored user histories "
        "(default 1000; 0: skip)",
    )
    p.add_argument(
        "--remove", action="store_true", help="remove the artifact's index instead of building"
    )


def cmd_index(args: argparse.Namespace) -> int:
    from seqrec.models.ann import IndexParams, ItemIndex
    from seqrec.models.base import Recommender
    from seqrec.serving.artifact import artifact_dir

    path = artifact_dir(args.artifact)
    model = Recommender.load(path)
    if args.remove:
        had = model.index is not None or (path / "index.npz").exists()
        model.index = None
        model.save(path, overwrite=True)
        print(f"{'removed the item index of' if had else 'no item index in'} {path}")
        return 0
    if model.index_unsupported:
        raise ConfigError(f"{model.name} cannot be indexed: {model.index_unsupported}")
    d = IndexParams()
    params = IndexParams(
        m=args.m,
        ef_construction=args.ef_construction,
        ef_search=args.ef_search,
        space=args.space,
        small_allow=d.small_allow,
        max_fetch=d.max_fetch,
    )
    vectors = model.item_vectors()
    model.index = None
    index = ItemIndex.build(vectors, params, threads=args.threads)
    model.index = index
    model.save(path, overwrite=True)
    print(
        f"indexed {index.n_items:,} items of {model.name} ({index.dim} dimensions) in "
        f"{index.build_seconds:.1f} s: HNSW ({params.space}) M={params.m}, ef_construction="
        f"{params.ef_construction}, ef_search={params.ef_search}; "
        f"{(path / 'index.npz').stat().st_size / 2**20:.1f} MiB in {path / 'index.npz'}"
    )
    if args.check:
        _check(model, args.check)
    return 0


def _check(model, n: int) -> None:
    """Recall@10 of the exact top-10 on up to ``n`` stored histories (the history filter)."""
    from seqrec.data.sequences import Sequences
    from seqrec.evaluation.ranking import seen_positions
    from seqrec.models.ann import index_top_k

    users = getattr(model, "user_histories", None)
    if users is None or len(users) == 0 or model.reads_time:
        print("recall check skipped: the artifact stores no user histories (or reads times)")
        return
    rng = np.random.default_rng(0)
    pick = np.sort(rng.choice(len(users), min(n, len(users)), replace=False))
    rows = [users.items[users.offsets[i] : users.offsets[i + 1]].astype(np.int64) for i in pick]
    seqs = Sequences.from_lists([r for r in rows if len(r)], n_items=model.n_items)
    t0 = time.process_time()
    exact, _ = model.top_k(seqs, 10, "history")
    t1 = time.process_time()
    ids, _, short = index_top_k(
        model.index, model.query_vectors(seqs), 10, seen_positions(seqs, "history")
    )
    t2 = time.process_time()
    recall = np.mean(
        [
            len(np.intersect1d(e[e > 0], i[i > 0])) / max(1, (e > 0).sum())
            for e, i in zip(exact, ids, strict=True)
        ]
    )
    print(
        f"recall@10 of exact ranking on {len(seqs)} stored histories (history filter): "
        f"{recall:.4f}; CPU s exact {t1 - t0:.2f}, index {t2 - t1:.2f} (both encode the "
        f"histories){f'; {int(short.sum())} rows would fall back to exact' if short.any() else ''}"
    )
