"""Peer worker for seqrec's own SASRec (run with seqrec's interpreter, PYTHONPATH=src).

Trains the DEFAULT ``SASRecConfig`` (only the sizes of the comparison are set) on the exported
training sequences and writes the same files as the other peers' workers (see ``run_peers.py``):
top-k lists for the validation and test users, the validation curve and the timings. The lists
are scored by ``run_peers.py`` with seqrec's evaluator, like every other peer's.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

import numpy as np


def main(work: Path, out: Path, args: dict) -> None:
    import torch

    from seqrec.data.sequences import Sequences
    from seqrec.models.sasrec import SASRec, SASRecConfig

    torch.set_num_threads(1)
    split = np.load(work / "split.npz")
    n_items = int(split["n_items"])

    def seqs(prefix: str) -> Sequences:
        return Sequences(split[f"{prefix}_offsets"], split[f"{prefix}_items"], n_items=n_items)

    train, train_valid = seqs("train"), seqs("train_valid")
    users = split["eval_rows"]
    cfg = SASRecConfig(dim=args["dim"], n_blocks=args["n_blocks"], n_heads=args["n_heads"],
                       max_len=args["max_len"], epochs=args["epochs"], seed=args["seed"], num_threads=1)
    from seqrec.data.sequences import Targets

    valid = Targets(train_valid, users, train.lengths[users], split["valid_items"])
    model = SASRec(cfg)
    t0 = time.perf_counter()
    model.fit(train, valid)
    fit_seconds = time.perf_counter() - t0
    k = args["k"]
    for name, hist in (("valid", train), ("test", train_valid)):
        h = hist.slice_rows(users, np.zeros(len(users), np.int64), hist.lengths[users])
        scores = model.score(h)
        top = _topk_unseen(scores, h, k)
        np.save(out / f"{name}_topk.npy", top)
    hist = [{"seconds": r["train_seconds"], "epoch": r["epoch"], "valid_ndcg10": r["metrics"]["NDCG@10"]}
            for r in model.training_log.history]
    info = {"library": "seqrec", "config": {f: getattr(cfg, f) for f in cfg.__dataclass_fields__},
            "fit_seconds": fit_seconds, "epochs": model.epochs_trained,
            "stopped": model.training_log.stopped, "curve": hist, "curve_scored_by": "seqrec trainer",
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    (out / "info.json").write_text(json.dumps(info, indent=2, default=str))


def _topk_unseen(scores: np.ndarray, hist, k: int) -> np.ndarray:
    scores = np.array(scores, np.float64, copy=True)
    scores[:, 0] = -np.inf
    for i in range(len(hist)):
        scores[i, hist.row(i)] = -np.inf
    return np.argsort(-scores, axis=1, kind="stable")[:, :k]


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3]))
