"""Peer worker for RecBole's SASRec (run with the interpreter of ``runs/peers/recbole`` by
``seqrec_lab.peers``: rows ``peer:recbole`` of ``configs/reproduce/peers.toml``).

RecBole reads pre-split "benchmark" files in its session format (one row per target:
``item_id_list`` = the at most ``max_len`` items before it, ``item_id`` = the target), so the
split exported by the harness is written as: train = every transition of every training
history (what RecBole's own augmentation of a sequential dataset produces), valid = training
history -> validation item, test = training + validation history -> test item. RecBole's SASRec
is trained with its own trainer: CE loss, the sizes and dropout given (hidden and attention
dropout both ``dropout``), its defaults otherwise (batch 2048, Adam lr 1e-3, post-LN blocks,
GELU, layer-norm eps 1e-12, initializer range 0.02), validation every epoch and its own early
stopping (``stopping_step`` = ``patience``), the model of its best epoch kept. The validation
score it stops and selects on: ``selection = "library"``, RecBole's own NDCG@10, which ranks
without a history filter (RecBole has no user history in this format); ``"filtered"``, seqrec's
NDCG@10 of the validation lists (``peer_select``: whole history removed), handed to RecBole's
trainer in place of its own, so that all three libraries select on the same number.
The lists returned are the top ``k`` of ``full_sort_predict`` after removing each user's whole
history (the same filter as seqrec's); after every epoch the validation lists are written too
(outside the training clock), so the harness draws the validation curve with seqrec's evaluator.
Past ``args["deadline"]`` (Unix seconds), or when asked to stop (``peer_stop``: the harness's
stop file or a signal; ``stopped = "interrupted"``), training stops after the current epoch, saving that
epoch (``ckpt/last.pth``) and its clock and curve (``worker_state.json``); the next call in the
same directory resumes from it (not bit-exact: the RNG streams restart).
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import peer_select  # beside this file (the script's directory is on sys.path)
import peer_stop
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
            rows["train"].append(
                f"{user}\t{' '.join(map(str, items[max(0, t - max_len) : t]))}\t{items[t]}"
            )
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
    import recbole.trainer.trainer as rb_trainer
    from recbole.config import Config
    from recbole.data import create_dataset, data_preparation
    from recbole.model.sequential_recommender import SASRec
    from recbole.trainer import Trainer
    from recbole.utils import init_seed

    torch.set_num_threads(args["num_threads"])
    data_path, full_histories, _ = write_files(work, args["max_len"])
    cfg = {
        "data_path": str(data_path),
        "benchmark_filename": ["train", "valid", "test"],
        "USER_ID_FIELD": "session_id",
        "ITEM_ID_FIELD": "item_id",
        "load_col": {"inter": ["session_id", "item_id_list", "item_id"]},
        "alias_of_item_id": ["item_id_list"],
        "MAX_ITEM_LIST_LENGTH": args["max_len"],
        "n_layers": args["n_blocks"],
        "n_heads": args["n_heads"],
        "hidden_size": args["dim"],
        "inner_size": 4 * args["dim"],
        "hidden_dropout_prob": args["dropout"],
        "attn_dropout_prob": args["dropout"],
        "loss_type": "CE",
        "train_neg_sample_args": None,
        "epochs": args["epochs"],
        "eval_step": 1,
        "stopping_step": args["patience"],
        "valid_metric": "NDCG@10",
        "metrics": ["NDCG", "Recall"],
        "topk": [10],
        "eval_args": {"order": "TO", "mode": "full", "group_by": "user"},
        "seed": args["seed"],
        "reproducibility": True,
        "show_progress": False,
        "checkpoint_dir": str(out / "ckpt"),
        "device": "cpu",
        "use_gpu": False,
        "worker": 0,
    }
    config = Config(model="SASRec", dataset="peers", config_dict=cfg)
    init_seed(config["seed"], config["reproducibility"])
    dataset = create_dataset(config)
    train_data, valid_data, test_data = data_preparation(config, dataset)
    model = SASRec(config, train_data.dataset).to("cpu")
    trainer = Trainer(config, model)
    tokens = dataset.field2id_token["item_id"]
    ours = np.array([0] + [int(t) for t in tokens[1:]], np.int64)  # RecBole id -> seqrec id
    sessions = dataset.field2id_token["session_id"]
    valid_rows = pd.read_csv(work / "valid.csv")
    users, targets = valid_rows["user_id"].to_numpy(), valid_rows["item_id"].to_numpy()
    filtered = args.get("selection", "library") == "filtered"

    def lists(loader, name: str) -> np.ndarray:
        """Top-k seqrec ids per evaluation user, the user's whole history removed."""
        was_training = trainer.model.training
        trainer.model.eval()
        found = {}
        with torch.no_grad():
            for batch in loader:
                inter = batch[0]
                scores = trainer.model.full_sort_predict(inter).view(len(inter), -1).numpy().copy()
                scores[:, 0] = -np.inf
                sess = inter["session_id"].numpy()
                for i in range(len(inter)):
                    user = int(sessions[sess[i]])
                    top = ours[np.argsort(-scores[i], kind="stable")]
                    top = top[~np.isin(top, full_histories[name][user])][: args["k"]]
                    found[user] = np.pad(
                        top, (0, args["k"] - len(top))
                    )  # 0 = no item (tiny catalogues)
        trainer.model.train(was_training)
        return np.stack([found[u] for u in users])

    if args.get("time_batches"):  # a timing probe, not a run (docs/results/recbole_epoch_*.md)
        probe = time_batches(trainer, train_data, int(args["time_batches"]))
        (out / "info.json").write_text(
            json.dumps({"library": "recbole", "version": recbole.__version__, **probe}, indent=2)
        )
        return
    times: list[float] = []
    curve: list[dict] = []
    state = {"stopped": None}
    # resumable: a run stopped by the deadline left its last epoch (model, optimizer, RecBole's
    # early-stopping counters) and its clock; RNG streams restart, so a resume is not bit-exact
    (out / "ckpt").mkdir(exist_ok=True)
    last, best_file, saved = (
        out / "ckpt" / "last.pth",
        out / "ckpt" / "best.pth",
        out / "worker_state.json",
    )
    if last.exists() and saved.exists() and best_file.exists():
        # RecBole's own resume_checkpoint calls torch.load with the weights-only default of
        # torch >= 2.6, which refuses its checkpoints (they hold the Config): the same steps here
        ck = torch.load(last, map_location="cpu", weights_only=False)
        trainer.start_epoch, trainer.cur_step = ck["epoch"] + 1, ck["cur_step"]
        trainer.best_valid_score = ck["best_valid_score"]
        trainer.model.load_state_dict(ck["state_dict"])
        trainer.model.load_other_parameter(ck.get("other_parameter"))
        trainer.optimizer.load_state_dict(ck["optimizer"])
        prior = json.loads(saved.read_text())
        times, curve = prior["times"], prior["curve"]
    trainer.saved_model_file = str(best_file)  # a fixed name (RecBole's holds the start time)
    orig_train_epoch = trainer._train_epoch

    def timed_train_epoch(*a, **kw):  # training seconds only (validation and lists excluded)
        t0 = time.perf_counter()
        result = orig_train_epoch(*a, **kw)
        times.append(time.perf_counter() - t0)
        return result

    trainer._train_epoch = timed_train_epoch
    orig_valid = trainer._valid_epoch

    def logged_valid(*a, **kw):  # RecBole's own (unfiltered) validation, plus seqrec's lists
        score, result = orig_valid(*a, **kw)
        name = f"valid_topk_epoch{len(times):03d}.npy"
        arr = lists(valid_data, "valid")
        np.save(out / name, arr)
        point = {
            "epoch": len(times),
            "seconds": sum(times),
            "topk_file": name,
            "recbole_valid_ndcg10": float(score),
        }
        curve.append(point)
        if filtered:  # RecBole's early stopping and best model then follow seqrec's metric
            score = point["valid_ndcg10"] = peer_select.ndcg_at(arr, targets, 10)
        return score, result

    trainer._valid_epoch = logged_valid
    orig_stopping = rb_trainer.early_stopping

    def stopping(*a, **kw):  # RecBole's rule, and the harness's deadline
        best, cur_step, stop, update = orig_stopping(*a, **kw)
        if stop:
            state["stopped"] = "patience"
        elif why := peer_stop.reason(out, args.get("deadline")):
            stop, state["stopped"] = True, why
        return best, cur_step, stop, update

    rb_trainer.early_stopping = stopping
    t0 = time.perf_counter()
    trainer.fit(train_data, valid_data, saved=True, show_progress=False)
    wall = time.perf_counter() - t0
    trainer._save_checkpoint(len(times) - 1, verbose=False, saved_model_file=str(last))
    saved.write_text(json.dumps({"times": times, "curve": curve}))
    trainer.model.load_state_dict(
        torch.load(trainer.saved_model_file, weights_only=False)["state_dict"]
    )
    for name, loader in (("valid", valid_data), ("test", test_data)):
        np.save(out / f"{name}_topk.npy", lists(loader, name))
    key = "valid_ndcg10" if filtered else "recbole_valid_ndcg10"
    picked = max(curve, key=lambda p: p[key]) if curve else None
    info = {
        "library": "recbole",
        "version": recbole.__version__,
        "config": {k: v for k, v in cfg.items() if k not in ("data_path", "checkpoint_dir")},
        "fit_seconds": sum(times),
        "fit_wall_seconds_this_call": wall,
        "epochs": len(times),
        "steps": len(times) * len(train_data),
        "loss": "ce",
        "params": int(sum(p.numel() for p in trainer.model.parameters())),
        "stopped": state["stopped"] or "epochs",
        "selected_epoch": picked["epoch"] if picked else None,
        "selection": "filtered" if filtered else "library",
        "best_valid_score": float(trainer.best_valid_score),
        "curve": curve,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    (out / "info.json").write_text(json.dumps(info, indent=2, default=str))


def time_batches(trainer, train_data, n: int) -> dict:
    """Seconds of RecBole's own training step (its loss, backward, Adam step) on the first
    ``n + 1`` batches of an epoch, the first discarded as warm-up, with the batches per epoch,
    so that an epoch's cost is measured, not extrapolated."""
    model, opt = trainer.model, trainer.optimizer
    model.train()
    seconds = []
    for i, inter in enumerate(train_data):
        if i > n:
            break
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = model.calculate_loss(inter)
        loss.backward()
        opt.step()
        seconds.append(time.perf_counter() - t0)
    return {
        "batch_seconds": seconds[1:],
        "warmup_seconds": seconds[0],
        "batches_per_epoch": len(train_data),
        "sequences_per_epoch": len(train_data.dataset),
        "batch_size": trainer.config["train_batch_size"],
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


if __name__ == "__main__":
    peer_stop.install()
    main(Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3]))
