"""The three orders of ML-1M that seqrec holds, compared (issue 14: where the published LRURec
Table 3 numbers come from).

* ``ml-1m-sasrec``: SASRec's ``ml-1m.txt`` (stable time sort, same-second ties in ``ratings.dat``
  line order);
* ``ml-1m-lrurec``: the LRURec repository's preprocessed pickle (ties by MovieID; the data of
  the LRURec paper's Table 3);
* ``ml-1m``: ``ml-1m.seq.tsv.xz`` (ties in an arbitrary order), restricted to the 3,416 items
  of the other two.

Part 1, data only: for each pair, the share of positions, whole sequences, test items (last
item) and validation items (second last) that agree.

Part 2, one model on two orders: the finished SASRec run of the ``lrurec`` table trained on
``ml-1m-sasrec`` (its best-validation weights), evaluated as the table evaluates (full ranking,
window seen filter of 200) on the validation and test targets of ``ml-1m-sasrec`` and of
``ml-1m-lrurec``. The interactions are the same, only the order of same-second ratings differs,
so the difference is what the model learned from SASRec's tie order.

    OMP_NUM_THREADS=1 PYTHONPATH=src .venv/bin/python benchmarks/diagnose_ml1m_orders.py

Needs ``../shared/data`` and the LRURec pickle (``seqrec data download ml-1m-lrurec``);
part 2 needs the run's checkpoint under runs/reproduce (``seqrec reproduce lrurec --runs
sasrec-ml1m``). Writes docs/results/ml1m_orders.{json,md}.
"""

from __future__ import annotations

import argparse
import json
from itertools import combinations
from pathlib import Path

import numpy as np
import torch

from seqrec.data.sources import load
from seqrec.evaluation import evaluate
from seqrec.evaluation.results import base_record, hardware_line
from seqrec_lab.harness import plan
from seqrec_lab.runner import prepared_data
from seqrec_lab.spec import load_table

from diagnose_lsan_collisions import load_trained  # benchmarks/ is on sys.path when run

ROOT = Path(__file__).resolve().parents[1]
ORDERS = ("ml-1m-sasrec", "ml-1m-lrurec", "ml-1m")


def sequences(name: str, keep: set[int] | None) -> dict[int, np.ndarray]:
    """Raw item ids per raw user id, in the file's order (items outside ``keep`` dropped)."""
    inter = load(name)
    order = np.argsort(inter.user, kind="stable")  # the files are grouped by user already
    user, item = inter.user[order], inter.item[order]
    if keep is not None:
        mask = np.isin(item, np.fromiter(keep, np.int64))
        user, item = user[mask], item[mask]
    cuts = np.flatnonzero(np.diff(user)) + 1
    return {int(u[0]): i for u, i in zip(np.split(user, cuts), np.split(item, cuts), strict=True)}


def agreement(a: dict, b: dict) -> dict[str, float]:
    users = sorted(set(a) & set(b))
    same_pos = sum(int((a[u] == b[u]).sum()) for u in users if len(a[u]) == len(b[u]))
    total = sum(len(a[u]) for u in users)
    return {
        "users": len(users),
        "same multiset": float(np.mean([np.array_equal(np.sort(a[u]), np.sort(b[u])) for u in users])),
        "same position": same_pos / total,
        "identical sequence": float(np.mean([np.array_equal(a[u], b[u]) for u in users])),
        "same test item": float(np.mean([a[u][-1] == b[u][-1] for u in users])),
        "same validation item": float(np.mean([a[u][-2] == b[u][-2] for u in users])),
    }


def cross_order(runs_dir: Path) -> list[dict]:
    table = load_table("lrurec", ROOT)
    specs = table.select(run_ids=["sasrec-ml1m", "sasrec-ml1m-lrurec-order"])
    planned = {p.spec.run_id: p for p in plan(table, specs, runs_dir, ROOT / "docs" / "reproduce" / "runs")}
    src = planned["sasrec-ml1m"]
    if not (runs_dir / src.key / "last.pt").exists():
        print(f"part 2 skipped: no checkpoint {runs_dir / src.key}")
        return []
    data = {p.spec.dataset: prepared_data(p.spec) for p in planned.values()}
    a, b = (data[n].split.train.vocab.raw for n in ("ml-1m-sasrec", "ml-1m-lrurec"))
    if not np.array_equal(a, b):
        raise SystemExit("the two orders give different item vocabularies: no cross evaluation")
    model, _ = load_trained(src.spec, src.key, runs_dir)  # same loading as the LSAN diagnostic
    rows = []
    for name in ("ml-1m-sasrec", "ml-1m-lrurec"):
        for split in ("valid", "test"):
            res = evaluate(model, getattr(data[name].split, split), ks=(10, 20),
                           seen_filter="window", window=model.config.max_len)
            rows.append({"trained on": "ml-1m-sasrec", "evaluated on": name, "split": split,
                         "key": src.key} | {k: res.metrics[k] for k in
                                             ("NDCG@10", "Recall@10", "NDCG@20", "Recall@20")})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs-dir", default=str(ROOT / "runs" / "reproduce"))
    ap.add_argument("--out", default=str(ROOT / "docs" / "results"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    seqs = {"ml-1m-sasrec": sequences("ml-1m-sasrec", None)}
    items = {int(i) for s in seqs["ml-1m-sasrec"].values() for i in s}
    seqs["ml-1m-lrurec"] = sequences("ml-1m-lrurec", None)
    seqs["ml-1m"] = sequences("ml-1m", items)
    pairs = [{"a": x, "b": y} | agreement(seqs[x], seqs[y]) for x, y in combinations(ORDERS, 2)]
    for p in pairs:
        print(json.dumps(p))
    cross = cross_order(Path(args.runs_dir))
    for r in cross:
        print(json.dumps(r))
    cmd = "OMP_NUM_THREADS=1 PYTHONPATH=src .venv/bin/python benchmarks/diagnose_ml1m_orders.py"
    rec = base_record(benchmark="diagnose_ml1m_orders", command=cmd, datasets=list(ORDERS),
                      protocol="leave-last-out (last item = test, second last = validation); "
                               "full ranking, window seen filter 200", seed=0,
                      agreement=pairs, cross_order=cross)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "ml1m_orders.json").write_text(json.dumps(rec, indent=2) + "\n")
    cols = ["same multiset", "same position", "identical sequence", "same test item", "same validation item"]
    lines = ["# ML-1M: SASRec's order, the LRURec repository's order and ml-1m.seq", "",
             f"Command: `{cmd}`  ", f"Hardware: {hardware_line(rec['hardware'])}", "",
             "## The orders, compared (share of the 6,040 users, or of the positions)", "",
             "| a | b | " + " | ".join(cols) + " |", "|---|---|" + "---|" * len(cols)]
    lines += [f"| {p['a']} | {p['b']} | " + " | ".join(f"{p[c]:.3f}" for c in cols) + " |" for p in pairs]
    if cross:
        lines += ["", "## One model, two orders", "",
                  "SASRec of the `lrurec` table trained on `ml-1m-sasrec` (seed 0, best validation "
                  f"weights, key {cross[0]['key']}), evaluated on the targets of each order.", "",
                  "| evaluated on | split | NDCG@10 | Recall@10 | NDCG@20 | Recall@20 |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {r['evaluated on']} | {r['split']} | {r['NDCG@10']:.4f} | {r['Recall@10']:.4f} | "
                  f"{r['NDCG@20']:.4f} | {r['Recall@20']:.4f} |" for r in cross]
    (out / "ml1m_orders.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out / 'ml1m_orders.md'}")


if __name__ == "__main__":
    main()
