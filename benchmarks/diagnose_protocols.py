"""The ``protocols`` table, explained (issue 14, must-show 4): why SASRec loses 15% of its test
NDCG@10 when leave-last-out is replaced by the global temporal split, while PureSVD-N and
LA-SATF gain.

Leave-last-out (LOO) trains on every interaction but each user's last two, whenever they
happened, so for most users the training data holds other users' LATER interactions. Three
measurements on Amazon Beauty (``amazon-beauty``, the table's data and splits):

1. How much of the LOO training data lies after each user's test interaction (the amount of
   "future" a model may learn from), and which share of the temporal test targets are items
   the temporal training data never saw (they cannot be ranked well by any model).
2. What the future is worth, without any learned model: popularity counted from the LOO
   training data in a window of ``--days`` days on both sides of each test interaction (leaky:
   it reads what other users bought after the test time) against the same width of window
   ending at the test time (causal), and the global popularity (the table's Pop).
3. Where the LOO models score: the table's finished LOO runs (SASRec's best-validation weights
   from its checkpoint; Pop refitted; ``--factor`` fits PureSVD-N and LA-SATF on both splits
   too, with the table's settings and no validation, about 25 min on one core) evaluated once, their test NDCG@10 split by WHEN each user's test
   interaction happened: before the temporal split's validation window (the most future data),
   in it, or in the temporal test window (almost none).

    OMP_NUM_THREADS=1 PYTHONPATH=src .venv/bin/python benchmarks/diagnose_protocols.py

Needs the data (``seqrec data download amazon-beauty`` or ``../shared/data``) and, for SASRec,
the checkpoint of ``seqrec reproduce protocols --runs sasrec-loo`` under runs/reproduce.
Writes docs/results/protocols_leakage.{json,md}.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from seqrec.evaluation import evaluate
from seqrec.evaluation.results import base_record, hardware_line
from seqrec.registry import get_model
from seqrec_lab.harness import plan
from seqrec_lab.runner import prepared_data
from seqrec_lab.spec import load_table

from diagnose_lsan_collisions import load_trained  # benchmarks/ is on sys.path when run

ROOT = Path(__file__).resolve().parents[1]
DAY = 86400


class WindowPop:
    """Popularity in a time window around each query: the training interactions with a time in
    ``[t - before, t + after]`` (``after > 0`` reads the future of the query time)."""

    def __init__(self, train, before: int, after: int) -> None:
        self.n_items = train.n_items
        order = np.argsort(train.timestamps, kind="stable")
        self.times, self.items = train.timestamps[order], train.items[order]
        self.before, self.after = before, after
        self._cache: dict[int, np.ndarray] = {}

    def _counts(self, t: int) -> np.ndarray:
        if t not in self._cache:
            lo = np.searchsorted(self.times, t - self.before, side="left")
            hi = np.searchsorted(self.times, t + self.after, side="right")
            c = np.bincount(self.items[lo:hi], minlength=self.n_items + 1).astype(np.float32)
            self._cache[t] = c
        return self._cache[t]

    def score(self, histories, query_times=None) -> np.ndarray:
        if query_times is None:
            raise SystemExit("WindowPop needs the targets' times")
        out = np.stack([self._counts(int(t)) for t in query_times])
        out[:, 0] = -np.inf
        return out


def ndcg_at(ranks: np.ndarray, k: int = 10) -> np.ndarray:
    """Per-target NDCG@k of one target ranked at 0-based ``ranks``."""
    return np.where(ranks < k, 1.0 / np.log2(ranks + 2.0), 0.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs-dir", default=str(ROOT / "runs" / "reproduce"))
    ap.add_argument("--out", default=str(ROOT / "docs" / "results"))
    ap.add_argument("--days", type=int, default=14, help="half-width of the popularity windows")
    ap.add_argument("--factor", action="store_true", help="also refit PureSVD-N and LA-SATF (LOO)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    table = load_table("protocols", ROOT)
    ids = ["pop-loo", "sasrec-loo", "sasrec-temporal"] + (["puresvd-n-loo", "la-satf-loo"] if args.factor else [])
    planned = {p.spec.run_id: p for p in plan(table, table.select(run_ids=ids), Path(args.runs_dir),
                                                ROOT / "docs" / "reproduce" / "runs")}
    loo = prepared_data(planned["sasrec-loo"].spec).split
    tmp = prepared_data(planned["sasrec-temporal"].spec).split
    info = tmp.info
    valid_start, test_start = int(info["valid_start"]), int(info["test_start"])
    test = loo.test
    if test.times is None or loo.train.timestamps is None:
        raise SystemExit("the LOO split carries no timestamps")
    t_test = test.times.astype(np.int64)

    # 1. the future inside LOO training data, and cold targets of the temporal split
    train_times = np.sort(loo.train.timestamps)
    after_share = 1.0 - np.searchsorted(train_times, t_test, side="right") / len(train_times)
    buckets = {
        "before the temporal validation window": t_test <= valid_start,
        "in the temporal validation window": (t_test > valid_start) & (t_test <= test_start),
        "in the temporal test window": t_test > test_start,
    }
    seen_tmp = tmp.train.item_counts() > 0
    facts = {
        "LOO test targets": int(len(test)),
        "LOO training interactions": int(len(train_times)),
        "median share of LOO training data after the user's test time": float(np.median(after_share)),
        "LOO test targets with >= 10% of the training data after them": float(np.mean(after_share >= 0.10)),
        "temporal test targets": int(len(tmp.test)),
        "temporal test targets whose item is not in the temporal training data": float(np.mean(~seen_tmp[tmp.test.items])),
        "LOO test targets whose item is not in the LOO training data": float(np.mean(~(loo.train.item_counts() > 0)[test.items])),
        "buckets": {name: {"targets": int(m.sum()), "median future share": float(np.median(after_share[m])) if m.any() else None}
                    for name, m in buckets.items()},
    }
    print(json.dumps(facts, indent=1))

    # 2 + 3. models on the LOO test targets, overall and by test time
    models: dict[str, object] = {}
    w = args.days * DAY
    models[f"popularity, {args.days} days on both sides of the test time (leaky)"] = WindowPop(loo.train, w, w)
    models[f"popularity, the {2 * args.days} days before the test time (causal)"] = WindowPop(loo.train, 2 * w, 0)
    for rid in ids:
        p = planned[rid]
        if rid == "sasrec-loo":
            models["SASRec trained on the LOO split (the table's run)"] = load_trained(p.spec, p.key, Path(args.runs_dir))[0]
        elif rid == "sasrec-temporal":
            # the same targets, a model that never saw anything after the temporal training cut
            if not np.array_equal(tmp.train.vocab.raw, loo.train.vocab.raw):
                raise SystemExit("the two splits number the items differently")
            models["SASRec trained on the temporal split (the table's run)"] = load_trained(p.spec, p.key, Path(args.runs_dir))[0]
            pop_config, pop = get_model("pop")
            models["Pop fitted on the temporal split"] = pop(pop_config()).fit(tmp.train, None)
        else:  # Pop, and with --factor PureSVD-N and LA-SATF: refitted (no validation) on each split
            _, cls = get_model(p.spec.model)
            name = p.spec.label.split(",")[0]
            for split_name, split in (("LOO", loo), ("temporal", tmp)):
                if rid == "pop-loo" and split_name == "temporal":
                    continue  # Pop on the temporal split comes with the temporal SASRec above
                print(f"fitting {name} on the {split_name} split ...", flush=True)
                models[f"{name} fitted on the {split_name} split"] = cls(p.spec.experiment.model_config()).fit(split.train, None)
    rows = []
    for name, model in models.items():
        res = evaluate(model, test, ks=(10,), seen_filter="history")
        nd = ndcg_at(res.ranks)
        row = {"model": name, "NDCG@10": float(nd.mean()), "HR@10": float(np.mean(res.ranks < 10))}
        row |= {f"NDCG@10 {b}": float(nd[m].mean()) if m.any() else None for b, m in buckets.items()}
        late = buckets["in the temporal test window"] & seen_tmp[test.items]
        row["NDCG@10 in the temporal test window, items the temporal training data saw"] = float(nd[late].mean())
        rows.append(row)
        print(json.dumps(row), flush=True)

    cmd = ("OMP_NUM_THREADS=1 PYTHONPATH=src .venv/bin/python benchmarks/diagnose_protocols.py"
           + (f" --days {args.days}" if args.days != 14 else "") + (" --factor" if args.factor else ""))
    rec = base_record(benchmark="diagnose_protocols", command=cmd, datasets=["amazon-beauty"],
                      protocol="leave-last-out test targets (history filter, full ranking) and the "
                               "global temporal split 3W/3W of the protocols table", seed=0,
                      temporal_boundaries={"valid_start": valid_start, "test_start": test_start},
                      facts=facts, models=rows, keys={r: planned[r].key for r in ids})
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "protocols_leakage.json").write_text(json.dumps(rec, indent=2, default=str) + "\n")
    names = list(buckets) + ["in the temporal test window, items the temporal training data saw"]
    future = facts["median share of LOO training data after the user's test time"]
    lines = ["# Leave-last-out against the temporal split on Amazon Beauty: what the future is worth", "",
             f"Command: `{cmd}`  ", f"Hardware: {hardware_line(rec['hardware'])}  ",
             "Data: `amazon-beauty` (5-core, day timestamps), the splits of `configs/reproduce/protocols.toml`; "
             "LOO test targets, history filter, full ranking, pessimistic ties.", "",
             "## The data", "",
             f"- Of the LOO training data, a median {future:.1%} "
             "lies after the user's own test interaction; "
             f"{facts['LOO test targets with >= 10% of the training data after them']:.1%} of the LOO test targets have at least 10% of it after them.",
             f"- {facts['temporal test targets whose item is not in the temporal training data']:.1%} of the temporal test targets "
             "are items the temporal training data never saw (LOO: "
             f"{facts['LOO test targets whose item is not in the LOO training data']:.1%}).", "",
             "| LOO test time | targets | median share of the training data after it |", "|---|---|---|"]
    lines += [f"| {b} | {v['targets']:,} | " + ("–" if v["median future share"] is None else f"{v['median future share']:.1%}") + " |"
              for b, v in facts["buckets"].items()]
    lines += ["", "## Test NDCG@10 on the LOO targets, by when the test interaction happened", "",
              "| model | all | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    for r in rows:
        lines.append(f"| {r['model']} | {r['NDCG@10']:.4f} | "
                     + " | ".join("–" if r[f'NDCG@10 {b}'] is None else f"{r[f'NDCG@10 {b}']:.4f}" for b in names) + " |")
    lines += ["", "The models fitted on the temporal split TRAINED on the LOO targets dated before the "
              "temporal validation window (they are in its training data): their first column and their "
              "'all' are not comparable. The two later columns are: the same targets with the same "
              "histories, ranked by a model that saw everybody's interactions up to the end of the data "
              "(LOO) and by one that saw nothing after the start of the validation window (temporal, "
              "no refit: 3 to 6 weeks stale at a test-window target)."]
    (out / "protocols_leakage.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out / 'protocols_leakage.md'}")


if __name__ == "__main__":
    main()
