"""Peer worker for RecTools' ``SASRecModel`` (run with the interpreter of ``runs/peers/rectools``
by ``seqrec_lab.peers``: rows ``peer:rectools`` of ``configs/reproduce/peers.toml``).

Reads the split exported by the harness (``train.csv`` / ``valid.csv`` / ``test.csv``:
seqrec's internal user and item ids, the order of each history as its datetime), trains
RecTools' SASRec at the sizes given, with RecTools' defaults otherwise (softmax loss, lr 1e-3,
batch 128, dropout 0.2), one torch thread, and
writes top-20 lists for the validation users (input: training items) and the test users (input:
training + validation items, same model). After every epoch a Lightning callback writes the
validation lists too (its time is excluded from the training clock), so that the harness draws
the validation curve with seqrec's evaluator; past ``args["deadline"]`` (Unix seconds) it stops
training after the current epoch (``stopped = "deadline"``; ``"interrupted"`` when the harness
was asked to stop or the worker got a signal, ``peer_stop``). Which epoch is kept:
``selection = "library"``, RecTools' own rule (a fixed epoch count, the model of the last epoch);
``"filtered"``, seqrec's rule (``peer_select``: the epoch whose validation lists score the best
NDCG@10, stopping after ``patience`` epochs without improvement; its test lists are written when
it is reached, as the model of a later epoch replaces it). Every epoch is saved as a Lightning
checkpoint (``ckpt/last.pth``: weights, Adam state, epoch and step counters) with its clock and
curve (``worker_state.json``), so a worker killed outright loses at most one epoch. The next call in the same directory resumes from it: RecTools
builds its model and trainer as usual, and the trainer's ``fit`` is handed the checkpoint
(``ckpt_path``), which is Lightning's own resume; the module is marked fitted so that RecTools'
start-of-training initialization keeps the restored weights. Not bit-exact: RNG states are not saved, so the
resumed epochs reseed torch and NumPy with ``seed + epochs done`` (a fresh shuffle stream rather
than a replay of epoch 1's).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import peer_select  # beside this file (the script's directory is on sys.path)
import peer_stop
import torch


def main(work: Path, out: Path, args: dict) -> None:
    import rectools
    from pytorch_lightning import Callback, Trainer
    from rectools import Columns
    from rectools.dataset import Dataset
    from rectools.models import SASRecModel

    torch.set_num_threads(args["num_threads"])
    (out / "ckpt").mkdir(exist_ok=True)
    last_ckpt, saved = out / "ckpt" / "last.pth", out / "worker_state.json"
    resume = last_ckpt.exists() and saved.exists()
    prior = json.loads(saved.read_text()) if resume else None
    seed = args["seed"] + (prior["clock"]["epoch"] if resume else 0)
    torch.manual_seed(seed)
    np.random.seed(seed)
    train = pd.read_csv(work / "train.csv")
    valid = pd.read_csv(work / "valid.csv")

    def interactions(df: pd.DataFrame) -> pd.DataFrame:
        return pd.DataFrame(
            {
                Columns.User: df["user_id"],
                Columns.Item: df["item_id"],
                Columns.Weight: 1.0,
                Columns.Datetime: pd.to_datetime(df["position"], unit="s"),
            }
        )

    ds_train = Dataset.construct(interactions(train))
    last = train.groupby("user_id")["position"].max()
    # the validation item goes right after each user's last training item, before the next user's
    valid_rows = valid.assign(position=valid["user_id"].map(last) + 0.5)
    ds_test = Dataset.construct(interactions(pd.concat([train, valid_rows], ignore_index=True)))
    users = valid["user_id"].to_numpy()
    targets = valid["item_id"].to_numpy()
    k = args["k"]
    filtered = args.get("selection", "library") == "filtered"
    clock = {
        "train": 0.0,
        "start": None,
        "epoch": 0,
        "stopped": "epochs",
        "steps": 0,
        "params": None,
    }
    curve: list[dict] = []
    picker = peer_select.BestEpoch(args.get("patience", 1))
    if resume:
        clock.update(prior["clock"], start=None, stopped="epochs")
        curve = prior["curve"]
        picker = peer_select.BestEpoch(args.get("patience", 1), prior.get("best"))

    def topk(model, dataset) -> np.ndarray:
        reco = model.recommend(
            users=users, dataset=dataset, k=k, filter_viewed=True, on_unsupported_targets="warn"
        )
        out_arr = np.zeros((len(users), k), np.int64)
        pos = {u: i for i, u in enumerate(users)}
        for u, grp in reco.groupby(Columns.User, sort=False):
            items = grp.sort_values(Columns.Rank)[Columns.Item].to_numpy()
            out_arr[pos[u], : len(items)] = items
        return out_arr

    class EpochLists(Callback):
        def on_train_start(self, trainer, pl_module):
            # RecTools' module draws fresh Xavier weights in its own on_train_start unless it is
            # marked fitted (the flag its fit_partial uses to continue training); Lightning has
            # restored the checkpoint's weights and Adam state by then, and callbacks run first.
            # Without this a resumed run restarts from random weights with the old Adam state
            # (the evidence: docs/results/peer_resume_rectools.md).
            if resume and args.get("keep_weights_on_resume", True):  # False: the old behaviour,
                pl_module.is_fitted = True  # to measure it

        def on_train_epoch_start(self, trainer, pl_module):
            clock["start"] = time.perf_counter()

        def on_train_epoch_end(self, trainer, pl_module):
            clock["train"] += time.perf_counter() - clock["start"]
            clock["epoch"] += 1
            model.is_fitted = True  # recommend() refuses otherwise; training resumes below
            arr = topk(model, ds_train)
            model.is_fitted = False
            pl_module.train()
            name = f"valid_topk_epoch{clock['epoch']:03d}.npy"
            np.save(out / name, arr)
            curve.append({"epoch": clock["epoch"], "seconds": clock["train"], "topk_file": name})
            clock["steps"] = int(trainer.global_step)
            clock["params"] = int(sum(p.numel() for p in pl_module.parameters()))
            why = peer_stop.reason(out, args.get("deadline"))
            if filtered:  # seqrec's rule: keep the best epoch's lists, stop on patience
                score = peer_select.ndcg_at(arr, targets, 10)
                curve[-1]["valid_ndcg10"] = score
                if picker.update(clock["epoch"], score):
                    model.is_fitted = True
                    np.save(out / "test_topk_best.npy", topk(model, ds_test))
                    model.is_fitted = False
                    pl_module.train()
                    np.save(out / "valid_topk_best.npy", arr)
                if picker.exhausted(clock["epoch"]) and clock["epoch"] < args["epochs"]:
                    clock["stopped"] = "patience"
                    trainer.should_stop = True
                    why = None
            if why and clock["epoch"] < args["epochs"]:
                clock["stopped"] = why
                trainer.should_stop = True
            if clock["epoch"] < args["epochs"]:
                # every epoch, not only at a stop: a worker killed outright (SIGKILL, the machine
                # lost) resumes from its last epoch instead of the last clean stop (hours earlier
                # on ML-1M); a few MB per epoch, written outside the training clock
                save_state(trainer)

    def save_state(trainer) -> None:
        """The checkpoint and the clock / curve, each written whole then renamed into place (a
        kill mid-write leaves the previous epoch's pair); the checkpoint goes first, and the two
        renames are adjacent."""
        tmp_ckpt, tmp_state = last_ckpt.with_suffix(".tmp"), saved.with_suffix(".tmp")
        trainer.save_checkpoint(tmp_ckpt)
        tmp_state.write_text(
            json.dumps(
                {
                    "clock": {k: v for k, v in clock.items() if k != "start"},
                    "curve": curve,
                    "best": picker.state,
                }
            )
        )
        os.replace(tmp_ckpt, last_ckpt)
        os.replace(tmp_state, saved)

    class ResumingTrainer(Trainer):
        """RecTools calls ``fit(module, train_loader, val_loader)``: resume from the checkpoint."""

        def fit(self, *a, **kw):
            if resume:
                kw.setdefault("ckpt_path", str(last_ckpt))
            return super().fit(*a, **kw)

    def trainer() -> Trainer:
        return ResumingTrainer(
            max_epochs=args["epochs"],
            deterministic=True,
            enable_progress_bar=False,
            enable_model_summary=False,
            logger=False,
            enable_checkpointing=False,
            devices=1,
            accelerator="cpu",
            callbacks=[EpochLists()],
        )

    model = SASRecModel(
        n_blocks=args["n_blocks"],
        n_heads=args["n_heads"],
        n_factors=args["dim"],
        session_max_len=args["max_len"],
        dropout_rate=args["dropout"],
        loss="softmax",
        epochs=args["epochs"],
        deterministic=True,
        recommend_torch_device="cpu",
        get_trainer_func=trainer,
    )
    t0 = time.perf_counter()
    model.fit(ds_train)
    wall = time.perf_counter() - t0
    if filtered and picker.state["best_epoch"] is not None:  # the best epoch's lists
        for name in ("valid", "test"):
            os.replace(out / f"{name}_topk_best.npy", out / f"{name}_topk.npy")
    else:  # RecTools' rule: the model of the last epoch
        np.save(out / "valid_topk.npy", topk(model, ds_train))
        np.save(out / "test_topk.npy", topk(model, ds_test))
    info = {
        "library": "rectools",
        "version": rectools.__version__,
        "config": {
            k_: v
            for k_, v in model.get_config(simple_types=True).items()
            if not k_.endswith("_type")
        },
        "fit_seconds": clock["train"],
        "fit_wall_seconds": wall,
        "epochs": clock["epoch"],
        "steps": clock["steps"],
        "params": clock["params"],
        "loss": "softmax",
        "selected_epoch": picker.state["best_epoch"] if filtered else clock["epoch"],
        "selection": "filtered" if filtered else "library",
        "stopped": clock["stopped"],
        "curve": curve,
        "resumed_from_epoch": prior["clock"]["epoch"] if resume else None,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    (out / "info.json").write_text(json.dumps(info, indent=2, default=str))


if __name__ == "__main__":
    peer_stop.install()
    main(Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3]))
