"""``seqrec index RUN``: build the approximate item index into a saved artifact."""

from __future__ import annotations

import argparse
import time

import numpy as np

from seqrec.errors import ConfigError


def add_index_args(p: argparse.ArgumentParser) -> None:
    from seqrec.models.ann import IVF_FROM_ITEMS, IndexParams

    d = IndexParams()
    p.add_argument(
        "artifact",
        help="a saved model: the run directory seqrec train printed (runs/shop-sasrec) or its model/ folder",
    )
    p.add_argument(
        "--kind",
        choices=["auto", "hnsw", "ivf"],
        default=d.kind,
        help="hnsw: a graph; ivf: an inverted file (k-means cells); auto: ivf from "
        f"{IVF_FROM_ITEMS:,} items up, else hnsw (default {d.kind}; docs/decisions/ann-library.md)",
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
        "--nlist",
        type=int,
        default=d.nlist,
        help="IVF cells (default 0: 4 * sqrt(items) rounded to a power of two)",
    )
    p.add_argument(
        "--nprobe",
        type=int,
        default=d.nprobe,
        help="IVF cells scanned per query: higher is closer to exact and slower (default 0: "
        "nlist / 32)",
    )
    p.add_argument(
        "--recall-target",
        type=float,
        default=0.995,
        help="raise ef_search / nprobe until recall@10 against exact ranking on a sample of "
        "the stored users reaches this (default 0.995; 0: keep the values given)",
    )
    p.add_argument(
        "--calibrate",
        type=int,
        default=1000,
        metavar="N",
        help="users the effort is calibrated on (default 1000; others are checked)",
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
        help="measure recall@10 against exact ranking on up to N stored user histories, "
        "other than the calibration's (default 1000; 0: skip)",
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
        kind=args.kind,
        m=args.m,
        ef_construction=args.ef_construction,
        ef_search=args.ef_search,
        nlist=args.nlist,
        nprobe=args.nprobe,
        space=args.space,
        small_allow=d.small_allow,
        max_fetch=d.max_fetch,
    )
    if not 0.0 <= args.recall_target <= 1.0:
        raise ConfigError(f"--recall-target must be in [0, 1], got {args.recall_target}")
    vectors = model.item_vectors()
    model.index = None
    index = ItemIndex.build(vectors, params, threads=args.threads)
    calibrate_on, check_on = _samples(
        model, args.calibrate if args.recall_target else 0, args.check
    )
    if args.recall_target and calibrate_on is None:
        print(
            "calibration skipped: the artifact stores no user histories (or reads times); "
            f"{index.params.effort_name} stays {index.params.effort}"
        )
    elif args.recall_target:
        _calibrate(model, index, vectors, calibrate_on, args.recall_target)
    model.index = index
    model.save(path, overwrite=True)
    print(
        f"indexed {index.n_items:,} items of {model.name} ({index.dim} dimensions) in "
        f"{index.build_seconds:.1f} s: {index.params.describe()}; "
        + (
            f"{len(index.always)} item(s) the graph cannot reach, scored exactly in every search; "
            if len(index.always)
            else ""
        )
        + f"{(path / 'index.npz').stat().st_size / 2**20:.1f} MiB in {path / 'index.npz'}"
    )
    if check_on is not None:
        _check(model, check_on)
    elif args.check and calibrate_on is not None:
        print("recall check skipped: every stored history was used for the calibration")
    elif args.check:
        print("recall check skipped: the artifact stores no user histories (or reads times)")
    return 0


def _samples(model, n_calibrate: int, n_check: int):
    """Two disjoint samples of the stored user histories (``Sequences`` or ``None``): the
    calibration's and the check's."""
    from seqrec.data.sequences import Sequences

    users = getattr(model, "user_histories", None)
    if users is None or len(users) == 0 or model.reads_time:
        return None, None
    lengths = np.diff(users.offsets)
    ids = np.flatnonzero(lengths > 0)
    ids = np.random.default_rng(0).permutation(ids)
    out = []
    for part in (ids[:n_calibrate], ids[n_calibrate : n_calibrate + n_check]):
        part = np.sort(part)
        rows = [users.items[users.offsets[i] : users.offsets[i + 1]].astype(np.int64) for i in part]
        out.append(Sequences.from_lists(rows, n_items=model.n_items) if len(rows) else None)
    return out[0], out[1]


def _calibrate(model, index, vectors, seqs, target: float) -> None:
    from seqrec.evaluation.ranking import seen_positions
    from seqrec.models.ann import calibrate

    t0 = time.process_time()
    cal = calibrate(
        index, vectors, model.query_vectors(seqs), seen_positions(seqs, "history"), 10, target
    )
    tried = ", ".join(f"{e}: {r:.4f}" for e, r in cal["tried"])
    print(
        f"calibrated {cal['parameter']} on {cal['queries']} stored histories for recall@10 >= "
        f"{target} (history filter): {cal['parameter']}={cal['value']}, recall {cal['recall']:.4f}"
        + ("" if cal["reached"] else f" (target NOT reached at the largest {cal['parameter']})")
        + f"; tried {tried}; {time.process_time() - t0:.1f} CPU s"
    )


def _check(model, seqs) -> None:
    """Recall@10 of the exact top-10 on the stored histories ``seqs`` (the history filter)."""
    from seqrec.evaluation.ranking import seen_positions
    from seqrec.models.ann import index_top_k

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
        f"recall@10 of exact ranking on {len(seqs)} other stored histories (history filter): "
        f"{recall:.4f}; CPU s exact {t1 - t0:.2f}, index {t2 - t1:.2f} (both encode the "
        f"histories){f'; {int(short.sum())} rows would fall back to exact' if short.any() else ''}"
    )
