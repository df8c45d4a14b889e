"""GA-SATF and LA-SATF on Amazon Beauty 5-core (issue 6, must-show 1 and 3).

Protocol as in ``bench_puresvd_beauty.py`` (the tensor paper's): iterative 5-core, global
temporal split with 3-week validation and test windows, growing histories, full ranking,
seen items filtered, per-interaction metrics, K = 50. For each model a small grid around the
authors' best Amazon Beauty configuration (recspert/SATF README) is fitted on the training part
with HOOI stopped when validation NDCG@10 has not improved for 3 iterations; the item-space
projector (``rescaled``) is a prediction-time switch, scored on the factors of the best
iteration. The winner is refit on train + validation for its best number of iterations and
evaluated on the test window. Then LA-SATF's fit time is measured as the item rank r2 grows
(Fig. 5 of the paper), plotted to docs/results/satf_fit_time.png, with peak RSS.

    nohup nice -n 5 .venv/bin/python benchmarks/bench_satf_beauty.py \
        > benchmarks/logs/satf_beauty.log 2>&1 &
    # or one process per model (the sweep runs with LA-SATF), then rebuild the table:
    #   ... bench_satf_beauty.py --models la-satf > benchmarks/logs/satf_beauty_la.log
    #   ... bench_satf_beauty.py --models ga-satf --sweep-ranks "" > benchmarks/logs/satf_beauty_ga.log
    #   .venv/bin/python benchmarks/bench_satf_beauty.py --table-only

Writes docs/results/beauty_temporal_{ga-satf,la-satf}.{json,md}, satf_fit_time.{json,png} and
the combined table beauty_temporal_satf.md (with Pop / PureSVD / PureSVD-N when
bench_puresvd_beauty.py has written them).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # 2 shared cores: threaded LAPACK thrashes

import argparse  # noqa: E402
import copy  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from dataclasses import asdict, replace  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_puresvd_beauty import (  # noqa: E402
    OUT,
    evaluate_split,
    peak_rss_gib,
    prepare_beauty,
    record,
)

from seqrec.evaluation import base_record, markdown_table, write_result  # noqa: E402
from seqrec.evaluation.results import hardware_line  # noqa: E402
from seqrec.models.factorization import GASATF, LASATF, GASATFConfig, LASATFConfig  # noqa: E402

log = logging.getLogger("bench")

# Grids: the authors' best AMZ-B configuration first, then single changes around it.
GRIDS = {
    "la-satf": (LASATF, LASATFConfig(max_iters=8), [
        {}, {"scaling": 0.0}, {"scaling": 0.4}, {"attention_decay": 1.0},
        {"attention_window": 5, "attention_rank": 2},
    ]),
    "ga-satf": (GASATF, GASATFConfig(max_iters=8), [
        {}, {"scaling": 0.0}, {"position_rank": 5}, {"attention_decay": 0.0},
    ]),
}


def tune(name, split, n_configs):
    cls, base, changes = GRIDS[name]
    rows, best = [], None
    for change in changes[:n_configs]:
        cfg = replace(base, **change)
        t0 = time.perf_counter()
        model = cls(cfg).fit(split.train, split.valid)
        fit_s = time.perf_counter() - t0
        for rescaled in (False, True):
            view = copy.copy(model)
            view.config = replace(cfg, rescaled=rescaled)
            res = evaluate_split(view, split.valid)
            row = {"change": {**change, "rescaled": rescaled}, "best_iteration": model.best_iteration,
                   "fit_seconds": fit_s, "iterations": model.history_,
                   **{k: res.metrics[k] for k in ("HR@10", "NDCG@10", "COV@10")}}
            rows.append(row)
            log.info("%s grid %s", name, {k: v for k, v in row.items() if k != "iterations"})
            if best is None or row["NDCG@10"] > best[0]["NDCG@10"]:
                best = (row, view.config, res)
    return rows, best


def final(name, prepared, split, best, rows):
    row, cfg, valid_res = best
    cls = GRIDS[name][0]
    cfg = replace(cfg, max_iters=row["best_iteration"])
    t0 = time.perf_counter()
    model = cls(cfg).fit(split.train_valid)
    fit_s = time.perf_counter() - t0
    test_res = evaluate_split(model, split.test)
    log.info("%s test %s (fit %.1fs)", name, test_res.metrics, fit_s)
    rec = record(name, None, prepared, {"valid": valid_res, "test": test_res}, cfg, fit_s,
                 grid=rows, selection="validation NDCG@10, early stopping patience 3",
                 iterations=model.history_, peak_rss_gib=peak_rss_gib())
    write_result(rec, OUT, stem=f"beauty_temporal_{name}")
    return rec, cfg


def sweep(split, cfg, ranks, repeats):
    """LA-SATF fit time vs item rank r2 (other settings fixed; r1 capped at r2 * r3 * r4)."""
    points = []
    q = cfg.attention_rank * cfg.sequences_rank
    for r2 in ranks:
        c = replace(cfg, item_rank=r2, user_rank=min(cfg.user_rank, r2 * q))
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            LASATF(c).fit(split.train_valid)
            times.append(time.perf_counter() - t0)
        points.append({"item_rank": r2, "user_rank": c.user_rank, "seconds": times,
                       "mean_seconds": sum(times) / len(times), "peak_rss_gib": peak_rss_gib()})
        log.info("sweep %s", points[-1])
    return points


def plot(points, cfg, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot([p["item_rank"] for p in points], [p["mean_seconds"] for p in points], "o-",
            label=f"LA-SATF ({cfg.max_iters} HOOI iterations)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("item rank r2")
    ax.set_ylabel("fit time, s")
    ax.set_title("Amazon Beauty: LA-SATF fit time vs item rank")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def combined_table():
    """One Markdown table from every Beauty temporal record on disk (this script and
    bench_puresvd_beauty.py; the SATF models may run in separate processes)."""
    recs = []
    for name in ("pop", "puresvd", "puresvd-n", "ga-satf", "la-satf"):
        path = OUT / f"beauty_temporal_{name}.json"
        if path.exists():
            recs.append(json.loads(path.read_text()))
    if not recs:
        return
    table = markdown_table(recs, metrics=["HR@10", "NDCG@10", "COV@10", "HR@20", "MRR"],
                           title="Amazon Beauty 5-core, temporal 3W/3W, K = 50 (paper HR@10 / "
                                 "NDCG@10 / COV@10: Pop 0.004/0.002/0.007, PureSVD "
                                 "0.082/0.046/0.251, PureSVD-N 0.087/0.047/0.615, GA-SATF "
                                 "0.079/0.043/0.182, LA-SATF 0.114/0.067/0.608)")
    (OUT / "beauty_temporal_satf.md").write_text(table)


def sweep_markdown() -> None:
    path = OUT / "satf_fit_time.json"
    if not path.exists():
        return
    rec = json.loads(path.read_text())
    lines = ["### LA-SATF fit time vs item rank (Amazon Beauty, train+valid of the 3W/3W split)", "",
             f"- config: `{rec['config']}` (user rank capped at item rank x r3 x r4)",
             f"- hardware: {hardware_line(rec['hardware'])}; {rec.get('note', '')}",
             f"- command: `{rec['command']}`; created {rec['created']}",
             f"- peak RSS of the whole benchmark process: {rec['peak_rss_gib']:.2f} GiB", "",
             "| item rank r2 | user rank r1 | fit s (mean) | runs |", "|---|---|---|---|"]
    for p in rec["points"]:
        lines.append(f"| {p['item_rank']} | {p['user_rank']} | {p['mean_seconds']:.1f} | "
                     f"{len(p['seconds'])} |")
    lines += ["", "![fit time](satf_fit_time.png)", ""]
    (OUT / "satf_fit_time.md").write_text("\n".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="la-satf,ga-satf")
    ap.add_argument("--configs", type=int, default=2, help="grid points per model (in order)")
    ap.add_argument("--sweep-ranks", default="100,300,600,1000")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--table-only", action="store_true", help="only rebuild the combined table")
    args = ap.parse_args()
    if args.table_only:
        sweep_markdown()
        return combined_table()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stdout)
    prepared, split = prepare_beauty()
    log.info("split %s", split.info)
    records, best_cfg = [], {}
    for name in args.models.split(","):
        rows, best = tune(name, split, args.configs)
        rec, best_cfg[name] = final(name, prepared, split, best, rows)
        records.append(rec)
        combined_table()
    if "la-satf" in best_cfg and args.sweep_ranks:
        cfg = best_cfg["la-satf"]
        points = sweep(split, cfg, [int(r) for r in args.sweep_ranks.split(",")], args.repeats)
        plot(points, cfg, OUT / "satf_fit_time.png")
        sweep_rec = base_record(benchmark="LA-SATF fit time vs item rank", dataset="amazon-beauty-5core",
                                data="train+valid of the 3W/3W temporal split", config=asdict(cfg),
                                points=points, peak_rss_gib=peak_rss_gib(),
                                note="OPENBLAS_NUM_THREADS=1 on a 2-core machine shared with "
                                     "other jobs; times are wall-clock")
        (OUT / "satf_fit_time.json").write_text(json.dumps(sweep_rec, indent=2, default=str) + "\n")
        sweep_markdown()
    log.info("done, peak RSS %.2f GiB", peak_rss_gib())


if __name__ == "__main__":
    main()
