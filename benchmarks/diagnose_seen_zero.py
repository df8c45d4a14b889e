"""How much the BSARec / TV-Rec seen filter (seen scores set to 0, PAD ranked) changes a model's
test metrics against seqrec's (seen scores and PAD at -inf), on the same trained weights.

Reads a harness checkpoint (``<runs-dir>/<key>/last.pt``: its best-validation weights) and the
run's ``identity.json``; scores every test user once and ranks the target both ways.

    PYTHONPATH=src python benchmarks/diagnose_seen_zero.py /work/beat-runs/<key>
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch

from seqrec.config import load_experiment
from seqrec.experiment import build_model, prepare_data


def main(run_dir: str) -> None:
    run = Path(run_dir)
    ident = json.loads((run / "identity.json").read_text())["identity"]
    overrides = [f"data.name={ident['data']['name']}", "data.filter=none", f"model.name={ident['model']}"]
    exp = load_experiment(None, overrides)
    split = prepare_data(exp).split
    cfg = json.loads((run / "run.json").read_text())
    model = build_model(exp)
    import dataclasses
    model.config = dataclasses.replace(model.config, **{k: (tuple(v) if isinstance(v, list) else v)
                                                       for k, v in cfg["config"].items()})
    model.n_items = int(cfg["n_items"])
    ck = torch.load(run / "last.pt", map_location="cpu", weights_only=False)
    state = ck["best_state"] or ck["model"]
    model._load_state({k: np.asarray(v) for k, v in state.items()})
    test = split.test
    hist = test.histories() if callable(getattr(test, "histories", None)) else test.inputs
    targets = np.asarray(test.items)
    res = {"inf": [], "zero": []}
    for idx, logits in model._score_chunks(hist, None):
        s = logits.numpy().copy()
        t = targets[idx]
        rows = np.arange(len(idx))
        h = hist.select(idx)
        seen_r = np.repeat(rows, h.lengths)
        seen_i = h.items
        ts = s[rows, t][:, None]
        # seqrec: seen and PAD at -inf, pessimistic ties
        a = s.copy()
        a[seen_r, seen_i] = -np.inf
        a[:, 0] = -np.inf
        res["inf"].append(((a > ts).sum(1) + (a == ts).sum(1) - 1))
        # theirs: seen at 0, PAD ranked with its raw score
        b = s.copy()
        b[seen_r, seen_i] = 0.0
        tb = b[rows, t][:, None]
        res["zero"].append(((b > tb).sum(1) + (b == tb).sum(1) - 1))
    for k, parts in res.items():
        r = np.concatenate(parts)
        print(f"{k:5s} users {len(r)} HR@10 {np.mean(r < 10):.4f} NDCG@10 "
              f"{np.mean(np.where(r < 10, 1 / np.log2(r + 2), 0)):.4f}")
    d = np.concatenate(res["zero"]) - np.concatenate(res["inf"])
    print(f"rank(zero) - rank(inf): min {d.min()}, users changed {np.count_nonzero(d)}, "
          f"changed inside the top 10 under -inf {np.count_nonzero((d != 0) & (np.concatenate(res['inf']) < 10))}")


if __name__ == "__main__":
    main(sys.argv[1])
