"""Approximate top-k retrieval (the item index of `seqrec index`) against exact ranking.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_ann.py --part libraries   # ~5 min
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_ann.py --part scale       # ~10 min
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_ann.py --part serve       # after scale
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_ann.py --part real RUN... # trained runs
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_ann.py --part scale --kind hnsw  # the graph
    .venv/bin/python benchmarks/bench_ann.py --part scale --tiny --no-write       # smoke run

Parts (each updates its own section of docs/results/ann.{json,md}):

* **libraries**: faiss (``IndexHNSWFlat``, inner product), hnswlib and usearch (whichever
  import; put the others on ``PYTHONPATH``) on a 100,000-item slice of the generated table:
  build time, size, CPU time per query and recall@10 against exact, over a sweep of
  ``ef_search``; one thread each.
* **scale**: the generated 1,000,000-item table with 100,000 users (as ``bench_scale.py``'s
  catalogue; the table is generated, not trained, see below). Exact top-10 (seqrec's exact
  path: chunked ``torch.mm`` into one reused buffer + ``torch.topk``, the seen items set to
  ``-inf``) on a sample of users; the index built with seqrec's defaults
  (:class:`seqrec.models.ann.IndexParams`; ``--kind`` another kind, recorded apart) on
  ``--build-threads``; a sweep of its search effort (``nprobe`` or ``ef_search``) on the same
  sample; the calibration ``seqrec index`` would do (recall@10 >= 0.995 on 1,000 other
  users); then the index top-10 of all users at the default effort through
  :func:`seqrec.models.ann.index_top_k` (the over-fetch, exact re-ranking and seen-item filter
  of ``recommend``). CPU seconds per user; peak RSS.
* **serve**: ``seqrec serve``'s load test (:mod:`seqrec.serving.loadtest`) on a 1M-item
  SASRec artifact carrying the generated table and the index of ``--part scale`` (which leaves
  them in ``--workdir``): p50 / p99 of single-user ``/recommend`` with the index and exact.
* **real**: trained runs (``seqrec train`` directories): the index built with the defaults
  and ``index_accuracy`` on the test targets (recall of the exact top-10, NDCG@10 / HR@10 of
  both, history filter).

The generated table is a Gaussian mixture shaped like trained item embeddings: 64 dimensions,
clusters (one per 500 items) with power-law sizes, each item its cluster's centre plus noise,
its norm and a folded-in bias growing with a Pareto popularity; each user mixes 1-3 interest
clusters (Dirichlet weights) plus noise and has 20 seen items from those clusters.
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results"


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--part", choices=["libraries", "scale", "serve", "real"])
    ap.add_argument(
        "--workdir",
        type=Path,
        default=ROOT / "runs" / "bench_ann",
        help="where scale keeps the generated table and index for serve (not committed)",
    )
    ap.add_argument(
        "--build-threads",
        type=int,
        default=1,
        help="threads of the index build (its CPU seconds are summed over them)",
    )
    ap.add_argument("--requests", type=int, default=400, help="serve: requests per path")
    ap.add_argument(
        "--kind",
        choices=["auto", "hnsw", "ivf"],
        default="auto",
        help="scale: the index kind (auto: seqrec's default for the size; recorded as "
        "'scale', another as 'scale_KIND')",
    )
    ap.add_argument(
        "--reuse-index",
        action="store_true",
        help="scale: load the index an earlier scale run left in --workdir instead of building "
        "it (its build time and size are carried over from docs/results/ann.json)",
    )
    ap.add_argument("runs", nargs="*", help="--part real: trained run directories")
    ap.add_argument("--kinds", default="hnsw,ivf", help="real: the index kinds built for each run")
    ap.add_argument(
        "--recall-target",
        type=float,
        default=0.995,
        help="real: calibrate each index's effort to this recall@10 on 1,000 stored users, as "
        "`seqrec index` does (0: the defaults uncalibrated)",
    )
    ap.add_argument("--sample", type=int, default=2000, help="users ranked exactly (scale)")
    ap.add_argument("--tiny", action="store_true", help="a small version (smoke test)")
    ap.add_argument("--no-write", action="store_true", help="do not write docs/results")
    ap.add_argument("--render-only", action="store_true", help="only rebuild ann.md from ann.json")
    return ap


if __name__ == "__main__":
    parser().parse_args()  # --help (and a wrong argument) before the heavy imports below

import json
import platform
import resource
import sys
import time

import numpy as np

D = 64
SEEN = 20


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def generate(n_items: int, n_users: int, seed: int = 0):
    """``(items [n + 1, D + 1] with PAD row 0 and the bias column, queries [U, D + 1], seen
    [U, SEEN] item ids)``: see the module docstring."""
    rng = np.random.default_rng(seed)
    n_clusters = max(20, n_items // 500)
    weight = 1.0 / np.arange(1, n_clusters + 1) ** 0.8
    weight /= weight.sum()
    centres = rng.standard_normal((n_clusters, D)).astype(np.float32)
    label = rng.choice(n_clusters, n_items, p=weight)
    pop = rng.pareto(1.2, n_items).astype(np.float32)
    items = np.empty((n_items + 1, D + 1), dtype=np.float32)
    items[0] = 0
    for s in range(0, n_items, 100_000):  # in slices: the noise block would double the peak
        e = min(s + 100_000, n_items)
        v = centres[label[s:e]] + 0.6 * rng.standard_normal((e - s, D), dtype=np.float32)
        items[1 + s : 1 + e, :D] = v * ((1 + 0.3 * np.log1p(pop[s:e])) / np.sqrt(D))[:, None]
    items[1:, D] = 0.5 * np.log1p(pop)
    n_interests = rng.integers(1, 4, n_users)
    queries = np.empty((n_users, D + 1), dtype=np.float32)
    queries[:, D] = 1.0
    by_cluster = np.argsort(label, kind="stable")
    starts = np.searchsorted(label[by_cluster], np.arange(n_clusters + 1))
    seen = np.zeros((n_users, SEEN), dtype=np.int64)
    for u in range(n_users):
        c = rng.choice(n_clusters, n_interests[u], p=weight)
        w = rng.dirichlet(np.ones(n_interests[u]))
        q = (w[:, None] * centres[c]).sum(0) + 0.5 * rng.standard_normal(D)
        queries[u, :D] = 3 * q / np.sqrt(D)
        members = np.concatenate([by_cluster[starts[x] : starts[x + 1]] for x in c])
        if len(members) == 0:
            members = np.arange(n_items)
        seen[u] = rng.choice(members, SEEN) + 1
    return items, queries, seen


def exact_top(items_t, queries: np.ndarray, seen: np.ndarray, k: int = 10, chunk: int = 128):
    """seqrec's exact path on one thread: scores into one reused buffer, seen items -inf,
    ``torch.topk``; returns ``(ids [U, k], cpu seconds)``."""
    import torch

    out = np.zeros((len(queries), k), dtype=np.int64)
    buf = None
    t0 = time.process_time()
    with torch.inference_mode():
        for s in range(0, len(queries), chunk):
            q = torch.from_numpy(queries[s : s + chunk])
            if buf is None:
                buf = q.new_empty(chunk, items_t.shape[0])
            b = buf[: len(q)]
            torch.mm(q, items_t.T, out=b)
            b[:, 0] = float("-inf")
            rows = torch.arange(len(q))[:, None].expand(-1, seen.shape[1])
            b[rows, torch.from_numpy(seen[s : s + chunk])] = float("-inf")
            v, i = torch.topk(b, k, dim=1)
            out[s : s + len(q)] = i.numpy()
    return out, time.process_time() - t0


def recall(found: np.ndarray, exact: np.ndarray) -> float:
    hits = [
        len(np.intersect1d(f[f > 0], e[e > 0])) / max(1, (e > 0).sum())
        for f, e in zip(found, exact, strict=True)
    ]
    return float(np.mean(hits))


def excluded_cells(seen: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rows = np.repeat(np.arange(len(seen)), seen.shape[1])
    return rows, seen.reshape(-1)


def _max_sq_norm(workdir: Path) -> float:
    path = workdir / "max_sq_norm.npy"
    return float(np.load(path)) if path.exists() else 0.0  # 0 for an "ip" index


def _dist_version(lib: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(lib)
    except PackageNotFoundError:
        return "?"


def hardware() -> dict:
    import os

    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_average": [round(x, 1) for x in os.getloadavg()],
        "note": "shared machine (2 cores, several jobs): CPU seconds, one thread",
    }


# --- parts -------------------------------------------------------------------------------------
def part_libraries(tiny: bool) -> dict:
    import torch

    torch.set_num_threads(1)
    n, nq = (5_000, 200) if tiny else (100_000, 2000)
    items, queries, seen = generate(n, nq, seed=1)
    exact, t_exact = exact_top(torch.from_numpy(items), queries, np.zeros((nq, 0), np.int64))
    rows = []
    x = np.ascontiguousarray(items[1:])
    for lib in ("faiss", "hnswlib", "usearch"):
        try:
            mod = __import__(lib)
        except ImportError:
            rows.append({"library": lib, "missing": True})
            continue
        version = getattr(mod, "__version__", None) or _dist_version(lib)
        for m in (16, 32):
            t0 = time.process_time()
            if lib == "faiss":
                mod.omp_set_num_threads(1)
                idx = mod.IndexHNSWFlat(D + 1, m, mod.METRIC_INNER_PRODUCT)
                idx.hnsw.efConstruction = 200
                idx.add(x)
                size = mod.serialize_index(idx).nbytes
            elif lib == "hnswlib":
                idx = mod.Index(space="ip", dim=D + 1)
                idx.init_index(max_elements=n, ef_construction=200, M=m)
                idx.set_num_threads(1)
                idx.add_items(x)
                import tempfile

                with tempfile.NamedTemporaryFile() as fh:
                    idx.save_index(fh.name)
                    size = Path(fh.name).stat().st_size
            else:
                from usearch.index import Index

                idx = Index(ndim=D + 1, metric="ip", dtype="f32", connectivity=m, expansion_add=200)
                idx.add(np.arange(n), x, threads=1)
                size = len(idx.save())
            build = time.process_time() - t0
            for ef in (64, 128, 256, 512):
                t0 = time.process_time()
                if lib == "faiss":
                    idx.hnsw.efSearch = ef
                    _, found = idx.search(queries, 10)
                elif lib == "hnswlib":
                    idx.set_ef(ef)
                    found, _ = idx.knn_query(queries, 10, num_threads=1)
                else:
                    idx.expansion_search = ef
                    found = idx.search(queries, 10, threads=1).keys
                tq = time.process_time() - t0
                rows.append(
                    {
                        "library": lib,
                        "version": version,
                        "M": m,
                        "ef_construction": 200,
                        "ef_search": ef,
                        "build_cpu_s": round(build, 2),
                        "size_mb": round(size / 2**20, 1),
                        "query_cpu_ms": round(1000 * tq / nq, 4),
                        "recall@10": round(recall(np.asarray(found, np.int64) + 1, exact), 4),
                    }
                )
                print(rows[-1], flush=True)
    return {
        "items": n,
        "queries": nq,
        "exact_query_cpu_ms": round(1000 * t_exact / nq, 4),
        "rows": rows,
    }


def part_scale(
    tiny: bool, sample: int, workdir: Path, build_threads: int, kind: str, reuse: bool = False
) -> dict:
    import torch

    from seqrec.models.ann import IndexParams, ItemIndex, calibrate, index_top_k

    torch.set_num_threads(1)
    n, users = (20_000, 2_000) if tiny else (1_000_000, 100_000)
    sample = min(sample, users // 4 if tiny else sample)
    base_mb = peak_mb()
    t0 = time.perf_counter()
    items, queries, seen = generate(n, users)
    gen_s = time.perf_counter() - t0
    items_t = torch.from_numpy(items)
    rng = np.random.default_rng(0)
    pick = np.sort(rng.choice(users, sample, replace=False))
    exact, t_exact = exact_top(items_t, queries[pick], seen[pick])
    print(f"exact: {1000 * t_exact / sample:.3f} CPU ms / user", flush=True)
    params = IndexParams(kind=kind).resolved(n)
    key = "scale" if kind == "auto" else f"scale_{kind}"
    if reuse:
        from seqrec.models.ann import require_faiss

        earlier = json.loads((OUT / "ann.json").read_text())[key]
        raw = require_faiss().deserialize_index(np.load(workdir / f"index_{params.kind}.npy"))
        index = ItemIndex(raw, n, D + 1, params, _max_sq_norm(workdir))
        build_cpu, build_wall = earlier["build_cpu_s"], earlier["build_wall_s"]
        build_threads = earlier["build_threads"]
        effort = params.effort_name
        assert {k: v for k, v in earlier["index_params"].items() if k != effort} == {
            k: v for k, v in params.__dict__.items() if k != effort
        }, "the saved index was built with other parameters"
    else:
        t0, w0 = time.process_time(), time.perf_counter()
        index = ItemIndex.build(items, params, threads=build_threads)
        build_cpu, build_wall = time.process_time() - t0, time.perf_counter() - w0
    size = index.nbytes()
    print(f"built in {build_cpu:.1f} CPU s ({size / 2**20:.0f} MiB)", flush=True)
    if not tiny and not reuse:  # for --part serve
        workdir.mkdir(parents=True, exist_ok=True)
        np.save(workdir / "items.npy", items)
        np.save(workdir / f"index_{params.kind}.npy", index.serialized())
        np.save(workdir / "max_sq_norm.npy", np.array(index.max_sq_norm))
    sweep = []
    efforts = (16, 32, 64, 128, 256) if params.kind == "ivf" else (32, 64, 128, 256, 512)
    for effort in efforts:
        index.params = params.with_effort(effort)
        t0 = time.process_time()
        ids, _, short = index_top_k(index, queries[pick], 10, excluded_cells(seen[pick]))
        t = time.process_time() - t0
        sweep.append(
            {
                params.effort_name: effort,
                "cpu_ms_per_user": round(1000 * t / sample, 4),
                "recall@10": round(recall(ids, exact), 4),
                "exact_fallback_rows": int(short.sum()),
            }
        )
        print(sweep[-1], flush=True)
    # what `seqrec index` would choose: calibration on 1,000 other users (target 0.995)
    others = np.setdiff1d(np.arange(users), pick)[:1000]
    index.params = params
    t0 = time.process_time()
    cal = calibrate(index, items, queries[others], excluded_cells(seen[others]), 10, 0.995)
    cal["cpu_s"] = round(time.process_time() - t0, 1)
    print("calibration", cal, flush=True)
    index.params = params
    t0 = time.process_time()
    all_ids = np.zeros((users, 10), dtype=np.int64)
    for s in range(0, users, 10_000):
        sl = slice(s, min(s + 10_000, users))
        all_ids[sl], _, _ = index_top_k(index, queries[sl], 10, excluded_cells(seen[sl]))
    t_all = time.process_time() - t0
    return {
        "items": n,
        "users": users,
        "dim": D + 1,
        "seen_per_user": SEEN,
        "generate_s": round(gen_s, 1),
        "exact_sample_users": sample,
        "exact_cpu_s_sample": round(t_exact, 2),
        "exact_cpu_ms_per_user": round(1000 * t_exact / sample, 4),
        "exact_cpu_s_all_users_extrapolated": round(t_exact / sample * users, 1),
        "index_params": params.__dict__,
        "index": params.describe(),
        "build_cpu_s": round(build_cpu, 1),
        "build_wall_s": round(build_wall, 1),
        "build_threads": build_threads,
        "index_reused": reuse,
        "index_mb": round(size / 2**20, 1),
        "sweep": sweep,
        "calibration_0.995": cal,
        "index_cpu_s_all_users": round(t_all, 2),
        "index_cpu_ms_per_user": round(1000 * t_all / users, 4),
        "recall@10_sample_default": next(
            r["recall@10"] for r in sweep if r[params.effort_name] == params.effort
        ),
        "recall@10_sample_all_users_run": round(recall(all_ids[pick], exact), 4),
        "cpu_ratio_exact_over_index": round((t_exact / sample) / (t_all / users), 1),
        "peak_rss_mb": round(peak_mb(), 0),
        "baseline_rss_mb": round(base_mb, 0),
    }


def part_serve(workdir: Path, n_requests: int) -> dict:
    """The serve load test on a 1M-item SASRec artifact whose item table is the generated one
    (``--part scale`` leaves it and its index in ``workdir``): single-user ``/recommend``, one
    client at a time, the server on one thread; with the index, then with ``SEQREC_EXACT=1``."""
    import torch

    from seqrec.data.vocab import ItemVocab
    from seqrec.models.ann import IndexParams, ItemIndex, require_faiss
    from seqrec.models.neural_config import settings
    from seqrec.models.sasrec import SASRec, SASRecConfig
    from seqrec.serving.loadtest import load_test

    items = np.load(workdir / "items.npy")
    n = len(items) - 1
    faiss = require_faiss()
    # the index --part scale left: its parameters are the ones ann.json records for it
    saved = json.loads((OUT / "ann.json").read_text())["scale"]["index_params"]
    params = IndexParams(**{"space": "ip", "kind": "hnsw", **saved})  # records before them
    raw = faiss.deserialize_index(np.load(workdir / f"index_{params.kind}.npy"))
    index = ItemIndex(raw, n, D + 1, params, _max_sq_norm(workdir))
    cfg = settings(SASRecConfig, dim=D + 1, n_blocks=2, n_heads=1, max_len=50, num_threads=1)
    model = SASRec(cfg)
    model.n_items, model.vocab = n, ItemVocab(np.arange(1, n + 1))
    model.popularity = np.ones(n + 1, dtype=np.float32)
    model.encoder = model.build_encoder(n)
    with torch.no_grad():  # the generated table as SASRec's (tied) item embeddings
        model.encoder.item_emb.weight.copy_(torch.from_numpy(items))
    model.encoder.eval()
    model.index = index
    art = workdir / "artifact"
    model.save(art, overwrite=True)
    rng = np.random.default_rng(0)
    payloads = [
        ("/recommend", {"history": rng.integers(1, n + 1, rng.integers(5, 51)).tolist(), "k": 10})
        for _ in range(n_requests)
    ]
    out = {
        "items": n,
        "dim": D + 1,
        "index_described": index.params.describe(),
        "artifact_mb": round(sum(f.stat().st_size for f in art.iterdir()) / 2**20, 0),
    }
    for name, env in (("index", {}), ("exact", {"SEQREC_EXACT": "1"})):
        res = load_test(
            art,
            payloads,
            n_requests,
            clients=1,
            max_seconds=600,
            warmup=20,
            env=env,
            start_timeout=600,
        )
        out[name] = {
            k: res[k]
            for k in ("requests", "errors", "p50_ms", "p99_ms", "throughput_rps", "rss_end_mb")
            if k in res
        }
        print(name, out[name], flush=True)
    return out


def part_real(runs: list[str], kinds: list[str], target: float) -> dict:
    from seqrec.cli.commands import _training_identity
    from seqrec.cli.index import _samples
    from seqrec.config import experiment_from_tree
    from seqrec.evaluation.index import index_accuracy
    from seqrec.evaluation.ranking import seen_positions
    from seqrec.experiment import prepare_data
    from seqrec.models.ann import IndexParams, ItemIndex, calibrate
    from seqrec.models.base import Recommender
    from seqrec.serving.artifact import artifact_dir

    out = []
    for run in runs:
        path = artifact_dir(run)
        model = Recommender.load(path)
        ident = _training_identity(path)
        exp = experiment_from_tree(
            {"data": dict(ident["data"]), "split": dict(ident["split"]), "seed": ident["seed"]}
        )
        data = prepare_data(exp)
        vectors = model.item_vectors()
        for kind in kinds:
            t0 = time.process_time()
            model.index = ItemIndex.build(vectors, IndexParams(kind=kind), threads=1)
            build = time.process_time() - t0
            cal = None
            seqs, _ = _samples(model, 1000, 0)
            if target and seqs is not None:  # as `seqrec index` does: 1,000 stored histories
                t0 = time.process_time()
                cal = calibrate(
                    model.index,
                    vectors,
                    model.query_vectors(seqs),
                    seen_positions(seqs, "history"),
                    10,
                    target,
                )
                cal["cpu_s"] = round(time.process_time() - t0, 2)
            res = index_accuracy(model, data.split.test, 10, "history")
            settings = model.settings
            rel = (res["index"]["NDCG@10"] - res["exact"]["NDCG@10"]) / res["exact"]["NDCG@10"]
            out.append(
                {
                    "run": Path(run).name,
                    "model": model.name,
                    "dataset": ident["data"]["name"],
                    "items": model.n_items,
                    "epochs": getattr(settings, "epochs", None),
                    "index": model.index.params.describe(),
                    "kind": model.index.params.kind,
                    "recall_target": target,
                    "calibration": cal,
                    "build_cpu_s": round(build, 2),
                    **{k: v for k, v in res.items() if k not in ("exact", "index")},
                    "exact": res["exact"],
                    "index_metrics": res["index"],
                    "ndcg10_relative_change": rel,
                }
            )
            print(out[-1], flush=True)
    return {"recall_target": target, "seen_filter": "history", "rows": out}


# --- report ------------------------------------------------------------------------------------
def render_scale(sc: dict, key: str) -> list[str]:
    p = sc["index_params"]
    kind = p.get("kind", "hnsw")  # records before "kind" are graphs
    effort = "nprobe" if kind == "ivf" else "ef_search"
    described = sc.get("index") or (
        f"HNSW ({p.get('space', 'ip')}) M={p['m']}, ef_construction={p['ef_construction']}, "
        f"ef_search={p['ef_search']}"
    )
    title = "the default index" if key == "scale" else f"kind {key.split('_', 1)[1]}"
    lines = [
        "",
        f"## Scale, {title}: {sc['items']:,} items, {sc['users']:,} users (generated)",
        "",
        f"Command: `{sc['command']}`; {sc['hardware']['platform']}, load "
        f"{sc['hardware']['load_average']}.",
        "",
        f"Exact top-10 (seqrec's chunked exact path, {sc['seen_per_user']} seen items per "
        f"user set to -inf) on a sample of {sc['exact_sample_users']:,} users: "
        f"**{sc['exact_cpu_ms_per_user']} CPU ms per user** "
        f"({sc['exact_cpu_s_all_users_extrapolated']} CPU s for all users, extrapolated "
        "linearly).",
        "",
        f"Index (faiss {described}, {sc['dim']} dimensions with the bias): built in "
        f"**{sc['build_cpu_s']} CPU s** on {sc['build_threads']} thread(s) "
        f"({sc['build_wall_s']} s wall), **{sc['index_mb']} MiB**"
        + (
            " (the index an earlier run of this part built and left in its workdir; the "
            "build figures are that run's)"
            if sc.get("index_reused")
            else ""
        )
        + f". All {sc['users']:,} users at the default "
        f"{effort}={p[effort]} through `index_top_k` (over-fetch, "
        + (
            "exact re-ranking of the candidates"
            if sc.get("index")
            else "no re-ranking: a record from before it"
        )
        + ", seen filter): "
        f"**{sc['index_cpu_s_all_users']} CPU s, {sc['index_cpu_ms_per_user']} ms per "
        f"user**, **{sc['cpu_ratio_exact_over_index']}x less CPU than exact**; recall@10 "
        f"against exact on the sample **{sc['recall@10_sample_all_users_run']}**. Peak RSS "
        f"{sc['peak_rss_mb']:.0f} MB (baseline {sc['baseline_rss_mb']:.0f} MB).",
    ]
    cal = sc.get("calibration_0.995")
    if cal:
        lines += [
            "",
            f"Calibration as `seqrec index` does it (recall@10 >= {cal['target']} on "
            f"{cal['queries']:,} other users, {cal['cpu_s']} CPU s): {cal['parameter']}="
            f"{cal['value']}, recall {cal['recall']:.4f}"
            + ("" if cal["reached"] else " (target not reached)")
            + ".",
        ]
    lines += [
        "",
        f"{effort} sweep on the sample (same index):",
        "",
        f"| {effort} | CPU ms / user | x less CPU than exact | recall@10 |",
        "|---:|---:|---:|---:|",
    ]
    for row in sc["sweep"]:
        ratio = sc["exact_cpu_ms_per_user"] / max(row["cpu_ms_per_user"], 1e-9)
        lines.append(
            f"| {row[effort]} | {row['cpu_ms_per_user']} | {ratio:.1f} | {row['recall@10']} |"
        )
    return lines


def render(r: dict) -> str:
    lines = [
        "# Approximate top-k retrieval: the item index against exact ranking",
        "",
        "Written by `benchmarks/bench_ann.py` (each part updates its section; the command and",
        "hardware of each part are beside it). CPU seconds on one thread of a shared machine.",
        "The generated table is a Gaussian mixture shaped like trained item embeddings (see",
        "the script's docstring): clustered, with norms and a bias growing with popularity,",
        "not uniform noise.",
    ]
    lib = r.get("libraries")
    if lib:
        lines += [
            "",
            "## Libraries (100,000 generated items, inner product, one thread)",
            "",
            f"Command: `{lib['command']}`; {lib['hardware']['platform']}, load "
            f"{lib['hardware']['load_average']}. {lib['queries']} queries; exact top-10 costs "
            f"{lib['exact_query_cpu_ms']} CPU ms per query. ef_construction 200. hnswlib "
            "(0.8.0, compiled from its source archive: PyPI has no wheel of it for this Python) "
            "and usearch were installed for this comparison only; seqrec's `ann` extra is "
            "faiss-cpu.",
            "",
            "| library | M | ef_search | build CPU s | size MB | CPU ms / query | recall@10 |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for row in lib["rows"]:
            if row.get("missing"):
                lines.append(f"| {row['library']} (not installed) | | | | | | |")
                continue
            lines.append(
                f"| {row['library']} {row['version']} | {row['M']} | {row['ef_search']} | "
                f"{row['build_cpu_s']} | {row['size_mb']} | {row['query_cpu_ms']} | "
                f"{row['recall@10']} |"
            )
    for key in sorted(k for k in r if k.startswith("scale")):
        lines += render_scale(r[key], key)
    sv = r.get("serve")
    if sv:
        lines += [
            "",
            f"## Serve load test: {sv['items']:,}-item artifact",
            "",
            f"Command: `{sv['command']}`; {sv['hardware']['platform']}, load "
            f"{sv['hardware']['load_average']}. SASRec (2 blocks, max_len 50) whose item table "
            "is the generated one, saved with the index of the scale part ("
            + sv.get(
                "index_described",
                "HNSW (l2) M=32, ef_construction=200, ef_search=256: a record from "
                "before the inverted file",
            )
            + f"; {sv['artifact_mb']:.0f} MB on disk); `uvicorn` on one thread "
            "(OMP_NUM_THREADS=1, 1 worker), one client sending single-user `/recommend` "
            "requests (a history of 5-50 random items, k = 10) one after the other, so each "
            "latency is one request alone on the server; the client shares the machine. "
            "Exact: the same artifact served with `SEQREC_EXACT=1` (`seqrec serve --exact`).",
            "",
            "| ranking | requests | errors | p50 ms | p99 ms | requests/s | server RSS MB |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for name in ("index", "exact"):
            x = sv[name]
            lines.append(
                f"| {name} | {x['requests']} | {x['errors']} | {x['p50_ms']:.1f} | "
                f"{x['p99_ms']:.1f} | {x['throughput_rps']:.1f} | {x['rss_end_mb']:.0f} |"
            )
    real = r.get("real")
    if real:
        lines += [
            "",
            "## Trained models: test NDCG@10 with the index against exact",
            "",
            f"Command: `{real['command']}`; {real['hardware']['platform']}. Each index built "
            "with the defaults of its kind, then its search effort calibrated as `seqrec "
            "index` does (raised until recall@10 against exact on 1,000 stored user histories, "
            "history filter, reaches the target; the value chosen is in the index column). "
            + "Leave-last-out test targets, history filter; both NDCG columns from top-10 "
            "lists of the same model."
            + (f" The runs: {real['trained']}" if real.get("trained") else ""),
            "",
            "| run | items | epochs | index | target | calibration recall | test recall@10 "
            "| NDCG@10 exact | NDCG@10 index | change | HR@10 exact | HR@10 index |",
            "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        order = [r["run"] for r in real["rows"]]  # first appearance of each run
        rows = sorted(
            real["rows"],
            key=lambda r: (order.index(r["run"]), r["kind"], r.get("recall_target") or 0),
        )
        for row in rows:
            cal = row.get("calibration")
            cal_txt = (
                "-" if not cal else f"{cal['recall']:.4f}" + ("" if cal["reached"] else " (short)")
            )
            x, y = row["exact"], row["index_metrics"]
            lines.append(
                f"| {row['run']} | {row['items']:,} | {row['epochs']} | {row['index']} | "
                f"{row.get('recall_target', 0.995) if cal else '-'} | {cal_txt} | {row['recall@10']:.4f} | {x['NDCG@10']:.4f} | {y['NDCG@10']:.4f} | "
                f"{100 * row['ndcg10_relative_change']:+.2f}% | {x['HR@10']:.4f} | "
                f"{y['HR@10']:.4f} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    args = parser().parse_args()
    if args.render_only:
        (OUT / "ann.md").write_text(render(json.loads((OUT / "ann.json").read_text())))
        return
    if args.part is None:
        raise SystemExit("--part is required (or --render-only)")
    if args.part == "libraries":
        result = part_libraries(args.tiny)
    elif args.part == "scale":
        result = part_scale(
            args.tiny, args.sample, args.workdir, args.build_threads, args.kind, args.reuse_index
        )
    elif args.part == "serve":
        result = part_serve(args.workdir, args.requests)
    else:
        if not args.runs:
            raise SystemExit("--part real needs trained run directories")
        result = part_real(args.runs, args.kinds.split(","), args.recall_target)
    result["command"] = "benchmarks/bench_ann.py " + " ".join(
        a if not a.startswith("/") else Path(a).name for a in sys.argv[1:]
    )
    result["hardware"] = hardware()
    result["created"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print(json.dumps(result)[:2000])
    if args.no_write or args.tiny:
        return
    path = OUT / "ann.json"
    record = json.loads(path.read_text()) if path.exists() else {}
    if args.part == "real" and "real" in record:  # one row per run and kind: newer replace older

        def key(row: dict) -> tuple:
            return row["run"], row.get("kind"), row.get("recall_target", 0.995)

        names = {key(row) for row in result["rows"]}
        kept = [
            row
            for row in record["real"]["rows"]
            if key(row) not in names and "index_metrics" in row
        ]
        result["rows"] = kept + result["rows"]
        if kept:
            result["command"] = record["real"]["command"] + "; " + result["command"]
        if "trained" in record["real"]:
            result["trained"] = record["real"]["trained"]
    key = args.part if args.part != "scale" or args.kind == "auto" else f"scale_{args.kind}"
    record[key] = result
    path.write_text(json.dumps(record, indent=2) + "\n")
    (OUT / "ann.md").write_text(render(record))


if __name__ == "__main__":
    main()
