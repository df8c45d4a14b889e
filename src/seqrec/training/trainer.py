"""One plain training loop shared by every neural model.

AdamW, optional gradient clipping, validation every N epochs (or N steps), early stopping on one
metric with patience, the best weights restored at the end, and exact resume after a crash.

Under ``torchrun`` (``dist`` given) each rank trains on its shard of every global batch and
only rank 0 validates and checkpoints: see :mod:`seqrec.training.distributed`.

Exact resume: every source of randomness of step ``s`` of epoch ``e`` is derived from
``(seed, e, s)`` — the epoch's data order from a per-epoch seeded generator, the step's negatives
from a per-step NumPy generator, dropout from ``torch.manual_seed`` of a per-step seed — so
restoring model + optimizer + counters from the last checkpoint replays the remaining steps
bit for bit. Global RNG states are saved as well (for code outside the loop that uses them).
"""

from __future__ import annotations

import json
import logging
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from seqrec import stop
from seqrec.errors import ConfigError
from seqrec.training import distributed
from seqrec.training.checkpoint import load_checkpoint, rng_state, save_checkpoint, set_rng_state

log = logging.getLogger(__name__)

LAST = "last.pt"


@dataclass
class TrainingLog:
    """What happened during ``fit``: every validation, the best one, timings."""

    history: list[dict[str, Any]] = field(default_factory=list)
    best_metric: float | None = None
    best_epoch: int | None = None
    best_step: int | None = None
    epochs_run: int = 0
    global_step: int = 0
    stopped: str = "epochs"
    train_seconds: float = 0.0
    batch_seconds: float = 0.0
    resumed_from_step: int | None = None
    epoch_log: list[dict[str, Any]] = field(default_factory=list)
    """One record per completed epoch (epoch, epochs, train_loss, validation metric, seconds)."""
    world_size: int = 1
    lr: float | None = None
    wall_seconds: float = 0.0
    """Wall-clock seconds of ``fit`` over every segment of a resumed run (checkpointed)."""
    earlier_wall_seconds: float = 0.0
    """The part of ``wall_seconds`` spent by earlier segments (those before the last resume)."""

    @property
    def batch_share(self) -> float:
        """Fraction of training-step time spent building batches (incl. negative sampling)."""
        return self.batch_seconds / self.train_seconds if self.train_seconds else 0.0


def step_seed(seed: int, epoch: int, step: int) -> int:
    """Deterministic 63-bit seed of one training step."""
    return int(
        np.random.SeedSequence([seed, epoch, step]).generate_state(2, np.uint32).view(np.uint64)[0]
        >> 1
    )


class Trainer:
    """Runs the loop for a model whose batches and loss are given as callables.

    Args:
        model: the torch module being trained (its parameters go to AdamW).
        config: a ``TrainConfig`` (lr, weight_decay, betas, batch_size, epochs, patience,
            eval_every, eval_every_steps, val_metric, grad_clip, seed).
        rows: training row indices to iterate over each epoch.
        make_batch: ``(rows, rng) -> batch`` (rng: the step's ``np.random.Generator``).
        compute_loss: ``batch -> scalar tensor``.
        validate: optional ``() -> {metric: value}``; drives early stopping on
            ``config.val_metric`` (higher is better).
        checkpoint_dir: where ``last.pt`` is written (and resumed from); None disables it.
        checkpoint_every: also checkpoint every this many steps (0: at epoch ends and
            validations only).
        log_path: JSONL file receiving one line per validation.
        progress: show a tqdm bar (only when stderr is a terminal).
        tensorboard_dir: write scalars there if ``tensorboard`` is installed.
        deadline: wall-clock time (``time.time()``) at which to checkpoint and stop without
            finishing the run (``stopped = "deadline"``); the next ``fit`` resumes it. Run
            control, not configuration: it never changes what the run computes. A stop
            request (:mod:`seqrec.stop`: SIGINT / SIGTERM) stops the same way, with
            ``stopped = "interrupted"``.
        on_epoch: called with each record of ``TrainingLog.epoch_log`` when its epoch ends
            (the CLI prints it; the library only logs it).
        device: where batches go.
        dist: the process group context under torchrun (None: one process).
        batch_weight: ``batch -> float``, what the loss is a mean over (e.g. target positions);
            weights each rank's share of a global batch under ``dist`` (default: rows).
        run: a ``RunConfig``: its ``max_train_seconds`` stops training after that many seconds
            of steps (None or 0: no time budget).
    """

    def __init__(
        self,
        model: nn.Module,
        config: Any,
        rows: np.ndarray,
        make_batch: Callable[[np.ndarray, np.random.Generator], Any],
        compute_loss: Callable[[Any], torch.Tensor],
        validate: Callable[[], dict[str, float]] | None = None,
        checkpoint_dir: str | Path | None = None,
        checkpoint_every: int = 0,
        log_path: str | Path | None = None,
        progress: bool = True,
        tensorboard_dir: str | Path | None = None,
        deadline: float | None = None,
        on_epoch: Callable[[dict[str, Any]], None] | None = None,
        dist: distributed.DistContext | None = None,
        batch_weight: Callable[[Any], float] | None = None,
        run: Any = None,
    ) -> None:
        if len(rows) == 0:
            raise ConfigError("no training sequence has >= 2 items: nothing to train on")
        self.model, self.config, self.rows = model, config, np.asarray(rows, np.int64)
        self.make_batch, self.compute_loss, self.validate = make_batch, compute_loss, validate
        self.dist, self.batch_weight = dist, batch_weight
        self.max_train_seconds = 0.0 if run is None else float(run.max_train_seconds)
        self.main = dist is None or dist.is_main
        self.checkpoint_dir = None if checkpoint_dir is None else Path(checkpoint_dir)
        self.checkpoint_every = int(checkpoint_every)
        if log_path is None and self.checkpoint_dir is not None:
            log_path = self.checkpoint_dir / "validation.jsonl"
        self.log_path = None if log_path is None else Path(log_path)
        self.progress = progress and sys.stderr.isatty() and self.main
        self.writer = _tensorboard(tensorboard_dir) if self.main else None
        self.lr = effective_lr(config)
        self.deadline = deadline
        self.optimizer = torch.optim.AdamW(
            _param_groups(model, config),
            lr=self.lr,
            weight_decay=config.weight_decay,
            betas=tuple(config.betas),
            fused=fused_adamw(model),
        )
        self.log = self._new_log()
        self.epoch = 0
        self.step_in_epoch = 0
        self.bad_evals = 0
        self.best_state: dict[str, torch.Tensor] | None = None
        self.finished = False
        self._loss_sum = 0.0
        self._loss_count = 0
        self.on_epoch = on_epoch
        self._sync_checked = False
        self._epoch_loss = [0.0, 0]  # sum and count of the current epoch's step losses

    def _new_log(self, **fields: Any) -> TrainingLog:
        world = 1 if self.dist is None else self.dist.world_size
        return TrainingLog(**fields, world_size=world, lr=self.lr)

    # --- checkpoints ------------------------------------------------------------------------
    def _payload(self) -> dict[str, Any]:
        lg = self.log
        return {
            "format": 1,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "epoch": self.epoch,
            "step_in_epoch": self.step_in_epoch,
            "bad_evals": self.bad_evals,
            "best_state": self.best_state,
            "finished": self.finished,
            "loss_sum": self._loss_sum,
            "loss_count": self._loss_count,
            "epoch_loss": list(self._epoch_loss),
            "log": {
                "history": json.dumps(lg.history),
                "best_metric": lg.best_metric,
                "best_epoch": lg.best_epoch,
                "best_step": lg.best_step,
                "epochs_run": lg.epochs_run,
                "global_step": lg.global_step,
                "stopped": lg.stopped,
                "train_seconds": lg.train_seconds,
                "batch_seconds": lg.batch_seconds,
                "epoch_log": json.dumps(lg.epoch_log),
                "wall_seconds": self._wall(),
            },
            "rng": rng_state(),
        }

    def save(self) -> None:
        if self.checkpoint_dir is not None and self.main:
            save_checkpoint(self.checkpoint_dir / LAST, self._payload())

    def try_resume(self) -> bool:
        """Load ``last.pt`` from ``checkpoint_dir`` if present; True when resumed."""
        found = self.checkpoint_dir is not None and (self.checkpoint_dir / LAST).exists()
        if self.dist is not None:  # rank 0's file, sent to every rank (no shared disk needed)
            ck = self.dist.broadcast_object(
                load_checkpoint(self.checkpoint_dir / LAST) if found and self.main else None
            )
        else:
            ck = load_checkpoint(self.checkpoint_dir / LAST) if found else None
        if ck is None:
            return False
        self.model.load_state_dict(ck["model"])
        self.optimizer.load_state_dict(ck["optimizer"])
        self.epoch, self.step_in_epoch = ck["epoch"], ck["step_in_epoch"]
        self.bad_evals, self.best_state, self.finished = (
            ck["bad_evals"],
            ck["best_state"],
            ck["finished"],
        )
        self._loss_sum, self._loss_count = ck["loss_sum"], ck["loss_count"]
        lg = dict(ck["log"])
        lg["history"] = json.loads(lg["history"])
        lg["epoch_log"] = json.loads(lg.get("epoch_log", "[]"))  # absent before it existed
        self._epoch_loss = list(ck.get("epoch_loss", (0.0, 0)))
        self.log = self._new_log(**lg, resumed_from_step=ck["log"]["global_step"])
        set_rng_state(ck["rng"])
        if self.finished and self.log.stopped in ("epochs", "time_budget"):
            self.finished = False  # a larger budget / more epochs continue the run
        if self.config.patience and self.bad_evals >= self.config.patience:
            self.finished = True
        elif self.finished and self.log.stopped == "patience":
            self.finished = False  # a larger patience continues it
        log.info(
            "resumed from %s at epoch %d step %d",
            self.checkpoint_dir / LAST,
            self.epoch,
            self.step_in_epoch,
        )
        return True

    # --- loop -------------------------------------------------------------------------------
    def _wall(self) -> float:
        """Wall seconds of the run so far: earlier segments' plus this one's."""
        start = getattr(self, "_segment_start", None)
        return self.log.earlier_wall_seconds + (
            0.0 if start is None else time.perf_counter() - start
        )

    def fit(self, resume: bool = True) -> TrainingLog:
        cfg = self.config
        self._segment_start = time.perf_counter()
        if resume:
            self.try_resume()
        self.log.earlier_wall_seconds = self.log.wall_seconds
        bs = cfg.batch_size
        n_steps = math.ceil(len(self.rows) / bs)
        budget = self.max_train_seconds
        if budget and self.log.train_seconds >= budget:
            self.finished = True
        while not self.finished and self.epoch < cfg.epochs:
            self.log.stopped = "epochs"
            order = np.random.default_rng([cfg.seed, 0x5EED, self.epoch]).permutation(self.rows)
            bar = _bar(n_steps, self.step_in_epoch, self.epoch, self.progress)
            for step in range(self.step_in_epoch, n_steps):
                t0 = time.perf_counter()
                rng = np.random.default_rng([cfg.seed, self.epoch, step])
                global_rows = order[step * bs : (step + 1) * bs]
                rows = distributed.shard(global_rows, self.dist)
                batch = self.make_batch(rows if len(rows) else global_rows[:1], rng)
                t1 = time.perf_counter()
                # rank 0 draws dropout like a single process; other ranks draw their own masks
                rank = 0 if self.dist is None else self.dist.rank
                torch.manual_seed(step_seed(cfg.seed, self.epoch, step) + rank)
                self.model.train()
                self.optimizer.zero_grad(set_to_none=True)
                loss = self.compute_loss(batch)
                if self.dist is not None:
                    weight = (
                        (self.batch_weight(batch) if self.batch_weight else len(rows))
                        if len(rows)
                        else 0.0
                    )
                    loss = loss * self.dist.loss_scale(float(weight))
                loss.backward()
                if cfg.grad_clip > 0:
                    nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
                self.optimizer.step()
                value = float(loss.detach())
                over_budget = bool(budget) and (
                    self.log.train_seconds + time.perf_counter() - t0 >= budget
                )
                past_deadline = (
                    self.deadline is not None and time.time() >= self.deadline
                ) or stop.requested()
                if self.dist is not None:  # rank 0's clock decides for every rank
                    value, (over_budget, past_deadline) = self.dist.step_summary(
                        value, over_budget, past_deadline
                    )
                    if not self._sync_checked:  # once per fit: a forward that bypassed DDP
                        self.dist.check_in_sync(self.model)
                        self._sync_checked = True
                if not math.isfinite(value):
                    raise FloatingPointError(
                        f"loss became {value} at epoch {self.epoch} step {step}"
                    )
                self._loss_sum += value
                self._loss_count += 1
                self._epoch_loss[0] += value
                self._epoch_loss[1] += 1
                t2 = time.perf_counter()
                self.log.batch_seconds += t1 - t0
                self.log.train_seconds += t2 - t0
                self.log.global_step += 1
                self.step_in_epoch = step + 1
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(
                        loss=f"{value:.4f}",
                        seq_s=f"{len(global_rows) / (t2 - t0):.0f}",
                        val=self._last_val(),
                    )
                if self.writer is not None:
                    self.writer.add_scalar("train/loss", value, self.log.global_step)
                if cfg.eval_every_steps and self.log.global_step % cfg.eval_every_steps == 0:
                    self._evaluate()
                    self.save()
                elif self.checkpoint_every and self.log.global_step % self.checkpoint_every == 0:
                    self.save()
                if self.finished:
                    break
                if over_budget:
                    self.log.stopped = "time_budget"
                    self.finished = True
                    break
                if past_deadline:
                    self.log.stopped = "interrupted" if stop.requested() else "deadline"
                    break
            if bar is not None:
                bar.close()
            if self.step_in_epoch >= n_steps:
                self.epoch += 1
                self.step_in_epoch = 0
                self.log.epochs_run = self.epoch
                if not cfg.eval_every_steps and self.epoch % cfg.eval_every == 0:
                    self._evaluate()
                self._end_epoch()
            if self.epoch >= cfg.epochs:
                self.finished = True
            self.save()
            if self.log.stopped in ("deadline", "interrupted"):
                break
        if self.best_state is not None:
            self.model.load_state_dict(self.best_state)
        if self.writer is not None:
            self.writer.close()
        self.log.wall_seconds = self._wall()
        return self.log

    def _end_epoch(self) -> None:
        """Record the epoch just completed and hand it to ``on_epoch``."""
        lg, cfg = self.log, self.config
        total, count = self._epoch_loss
        self._epoch_loss = [0.0, 0]
        rec: dict[str, Any] = {
            "epoch": self.epoch,
            "epochs": cfg.epochs,
            "step": lg.global_step,
            "train_loss": total / max(count, 1),
            "train_seconds": lg.train_seconds,
            "seconds": lg.train_seconds + sum(h["val_seconds"] for h in lg.history),
        }
        if lg.history and lg.history[-1]["step"] == lg.global_step:  # validated at this step
            rec["metric"] = cfg.val_metric
            rec["value"] = lg.history[-1]["metrics"][cfg.val_metric]
            rec["best"] = lg.best_metric
        lg.epoch_log.append(rec)
        log.info(
            "epoch %d/%d loss %.4f %s",
            self.epoch,
            cfg.epochs,
            rec["train_loss"],
            f"{cfg.val_metric} {rec['value']:.4f}" if "value" in rec else "",
        )
        if self.on_epoch is not None and self.main:  # rank 0 reports for all
            self.on_epoch(rec)

    def _last_val(self) -> str:
        if not self.log.history:
            return "-"
        return f"{self.log.history[-1]['metrics'].get(self.config.val_metric, float('nan')):.4f}"

    def _evaluate(self) -> None:
        if self.main:
            self._validate()
        else:
            self._loss_sum, self._loss_count = 0.0, 0
        if self.dist is not None:  # early stopping is rank 0's decision
            self.finished = self.dist.broadcast_flag(self.finished)

    def _validate(self) -> None:
        mean_loss = self._loss_sum / max(self._loss_count, 1)
        self._loss_sum, self._loss_count = 0.0, 0
        if self.validate is None:
            return
        t0 = time.perf_counter()
        metrics = {k: float(v) for k, v in self.validate().items()}
        name = self.config.val_metric
        if name not in metrics:
            raise ConfigError(f"val_metric {name!r} not among validation metrics {sorted(metrics)}")
        lg = self.log
        record = {
            "epoch": self.epoch,
            "step": lg.global_step,
            "train_loss": mean_loss,
            "metrics": metrics,
            "val_seconds": time.perf_counter() - t0,
            "train_seconds": lg.train_seconds,
            "batch_share": lg.batch_share,
        }
        lg.history.append(record)
        if lg.best_metric is None or metrics[name] > lg.best_metric:
            lg.best_metric, lg.best_epoch, lg.best_step = metrics[name], self.epoch, lg.global_step
            self.best_state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
            self.bad_evals = 0
        else:
            self.bad_evals += 1
        record["best"] = lg.best_metric
        log.info(
            "epoch %d step %d loss %.4f %s %.4f (best %.4f)",
            self.epoch,
            lg.global_step,
            mean_loss,
            name,
            metrics[name],
            lg.best_metric,
        )
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.log_path, "a") as fh:
                fh.write(json.dumps(record) + "\n")
        if self.writer is not None:
            for k, v in metrics.items():
                self.writer.add_scalar(f"valid/{k}", v, lg.global_step)
        if self.config.patience and self.bad_evals >= self.config.patience:
            lg.stopped = "patience"
            self.finished = True


def effective_lr(config: Any) -> float:
    """The learning rate after ``config.lr_rule`` (``fixed``, ``linear`` or ``sqrt`` in the
    global batch relative to ``config.lr_base_batch``); configs without a rule use ``lr``."""
    rule, base = getattr(config, "lr_rule", "fixed"), getattr(config, "lr_base_batch", 0)
    if rule == "fixed" or not base:
        return float(config.lr)
    ratio = config.batch_size / base
    return float(config.lr * (ratio if rule == "linear" else math.sqrt(ratio)))


def fused_adamw(model: nn.Module) -> bool | None:
    """Whether AdamW runs its fused kernel: every parameter a real floating tensor on CPU or
    CUDA. The fused step makes one pass over each parameter where the plain one makes one per
    elementwise operation (a large share of a step when the item table is large); the same
    update up to float rounding. None (torch's choice) otherwise."""
    params = list(model.parameters())
    if params and all(p.device.type in ("cpu", "cuda") and p.is_floating_point() for p in params):
        return True
    return None


def _param_groups(model: nn.Module, config: Any) -> list[dict]:
    """AdamW parameter groups: one, or (when ``decay_biases_and_norms`` is off and the model
    names its biases and norms) the decayed weights and the undecayed rest."""
    params = list(model.named_parameters())
    skip = set()
    if config.weight_decay > 0 and not getattr(config, "decay_biases_and_norms", True):
        skip = model.no_decay_names() if hasattr(model, "no_decay_names") else set()
    if not skip:
        return [{"params": [p for _, p in params]}]
    return [
        {"params": [p for n, p in params if n not in skip]},
        {"params": [p for n, p in params if n in skip], "weight_decay": 0.0},
    ]


def _bar(total: int, initial: int, epoch: int, enabled: bool):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(
        total=total, initial=initial, desc=f"epoch {epoch}", leave=False, dynamic_ncols=True
    )


def _tensorboard(path: str | Path | None):
    if path is None:
        return None
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        log.warning("tensorboard is not installed: not writing TensorBoard logs to %s", path)
        return None
    return SummaryWriter(str(path))
