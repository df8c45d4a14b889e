"""Peer worker for RecBole's SASRec (run with the interpreter of ``runs/peers/recbole``).

RecBole reads pre-split "benchmark" files in its session format (one row per target:
``item_id_list`` = the at most ``max_len`` items before it, ``item_id`` = the target), so the
split exported by ``run_peers.py`` is written as: train = every transition of every training
history (what RecBole's own augmentation of a sequential dataset produces), valid = training
history -> validation item, test = training + validation history -> test item. RecBole's SASRec
is trained with its own trainer and defaults (CE loss, batch 2048, its dropout 0.5 / GELU /
post-LN blocks), selecting the epoch on its own validation NDCG@10 (no history filter: RecBole
has no user history in this format); the lists returned to ``run_peers.py`` are the top 20 of
``full_sort_predict`` after removing each user's whole history (the same filter as seqrec's),
scored there by seqrec's evaluator.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch


def write_files(work: Path, max_len: int) -> tuple[Path, dict, dict]:
    train = pd.read_csv(work / "train.csv")
    valid = pd.read_csv(work / "valid.csv").set_index("user_id")["item_id"]
    test = pd.read_csv(work / "test.csv").set_index("user_id")["item_id"]
    root = work / "recbole" / "peers"
    root.mkdir(parents=True, exist_ok=True)
    head = "session_id:token\titem_id_list:token_seq\titem_id:token\n"
    rows = {"train": [], "valid": [], "test": []}
    histories = {}
    for user, grp in train.sort_values("position").groupby("user_id", sort=True):
        items = grp["item_id"].tolist()
        histories[user] = items
        for t in range(1, len(items)):
            rows["train"].append(f"{user}\t{' '.join(map(str, items[max(0, t - max_len):t]))}\t{items[t]}")
    for user, target in valid.items():
        h = histories[user]
        rows["valid"].append(f"{user}\t{' '.join(map(str, h[-max_len:]))}\t{target}")
        h2 = h + [target]
        rows["test"].append(f"{user}\t{' '.join(map(str, h2[-max_len:]))}\t{test[user]}")
    for name, lines in rows.items():
        (root / f"peers.{name}.inter").write_text(head + "\n".join(lines) + "\n")
    full = {"valid": histories, "test": {u: h + [int(valid[u])] for u, h in histories.items()}}
    return root.parent, full, {u: h for u, h in histories.items()}


def main(work: Path, out: Path, args: dict) -> None:
    import recbole
    from recbole.config import Config
    from recbole.data import create_dataset, data_preparation
    from recbole.model.sequential_recommender import SASRec
    from recbole.trainer import Trainer
    from recbole.utils import init_seed

    torch.set_num_threads(1)
    data_path, full_histories, _ = write_files(work, args["max_len"])
    cfg = {
        "data_path": str(data_path), "benchmark_filename": ["train", "valid", "test"],
        "USER_ID_FIELD": "session_id", "ITEM_ID_FIELD": "item_id",
        "load_col": {"inter": ["session_id", "item_id_list", "item_id"]},
        "alias_of_item_id": ["item_id_list"], "MAX_ITEM_LIST_LENGTH": args["max_len"],
        "n_layers": args["n_blocks"], "n_heads": args["n_heads"], "hidden_size": args["dim"],
        "inner_size": 4 * args["dim"], "loss_type": "CE", "train_neg_sample_args": None,
        "epochs": args["epochs"], "eval_step": 1, "stopping_step": 10,
        "valid_metric": "NDCG@10", "metrics": ["NDCG", "Recall"], "topk": [10],
        "eval_args": {"order": "TO", "mode": "full", "group_by": "user"},
        "seed": args["seed"], "reproducibility": True, "show_progress": False,
        "checkpoint_dir": str(out / "ckpt"), "device": "cpu", "use_gpu": False, "worker": 0,
    }
    config = Config(model="SASRec", dataset="peers", config_dict=cfg)
    init_seed(config["seed"], config["reproducibility"])
    dataset = create_dataset(config)
    train_data, valid_data, test_data = data_preparation(config, dataset)
    model = SASRec(config, train_data.dataset).to("cpu")
    trainer = Trainer(config, model)
    times: list[float] = []
    curve: list[dict] = []
    orig_train_epoch = trainer._train_epoch

    def timed_train_epoch(*a, **kw):  # training seconds only (RecBole's validation excluded)
        t0 = time.perf_counter()
        result = orig_train_epoch(*a, **kw)
        times.append(time.perf_counter() - t0)
        return result

    trainer._train_epoch = timed_train_epoch
    orig_valid = trainer._valid_epoch

    def logged_valid(*a, **kw):  # RecBole's own (unfiltered) validation NDCG@10 per epoch
        score, result = orig_valid(*a, **kw)
        curve.append({"epoch": len(times), "seconds": sum(times), "recbole_valid_ndcg10": float(score)})
        return score, result

    trainer._valid_epoch = logged_valid
    t0 = time.perf_counter()
    trainer.fit(train_data, valid_data, saved=True, show_progress=False)
    wall = time.perf_counter() - t0
    trainer.model.load_state_dict(torch.load(trainer.saved_model_file, weights_only=False)["state_dict"])
    model = trainer.model.eval()
    tokens = dataset.field2id_token["item_id"]
    ours = np.array([0] + [int(t) for t in tokens[1:]], np.int64)  # RecBole id -> seqrec id
    users = pd.read_csv(work / "valid.csv")["user_id"].to_numpy()
    for name, loader in (("valid", valid_data), ("test", test_data)):
        lists = {}
        with torch.no_grad():
            for batch in loader:
                inter = batch[0]
                scores = model.full_sort_predict(inter).view(len(inter), -1).numpy().copy()
                scores[:, 0] = -np.inf
                sess = inter["session_id"].numpy()
                for i in range(len(inter)):
                    user = int(dataset.field2id_token["session_id"][sess[i]])
                    top = np.argsort(-scores[i], kind="stable")
                    top = ours[top]
                    # the user's whole history is filtered, as seqrec's evaluator does
                    top = top[~np.isin(top, full_histories[name][user])][: args["k"]]
                    lists[user] = top
        np.save(out / f"{name}_topk.npy", np.stack([lists[u] for u in users]))
    best = trainer.best_valid_score
    info = {"library": "recbole", "version": recbole.__version__,
            "config": {k: v for k, v in cfg.items() if k not in ("data_path", "checkpoint_dir")},
            "fit_seconds": sum(times), "fit_wall_seconds": wall, "epochs": len(times),
            "stopped": "patience" if len(times) < args["epochs"] else "epochs",
            "recbole_best_valid_ndcg10": best, "recbole_curve": curve,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    (out / "info.json").write_text(json.dumps(info, indent=2, default=str))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3]))
