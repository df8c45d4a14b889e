"""Run directories of ``seqrec train`` and ``seqrec demo``: resume, refuse to overwrite, stage.

A ``seqrec train`` run directory holds::

    experiment.json     what the run is (data, split, model config, seed) + the command
    checkpoint/         last.pt (atomic, every epoch and every CHECKPOINT_EVERY steps), run.json
    model/              the artifact, written when training and evaluation are done
    train-log.jsonl     one line per epoch (epoch, loss, validation metric, seconds)
    train-curve.png     the same as a plot (loss; validation metric, kept epoch marked)
    result.json / .md   the result record (with the reason training stopped)

Rerunning the same command resumes from ``checkpoint/`` (a finished run is re-evaluated);
only budget and placement fields (epochs, patience, time budget, threads, device) may change
between the two (:func:`seqrec.identity.same_run`). A directory holding another run, or anything else, is refused unless ``--fresh``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import IO, Any

from seqrec.atomic import atomic_write
from seqrec.config import Experiment
from seqrec.errors import ConfigError
from seqrec.identity import differences, experiment_identity
from seqrec.locks import lock_dir

EXPERIMENT = "experiment.json"
CHECKPOINT = "checkpoint"
TRAIN_CURVE = "train-curve.png"
LOCK = ".lock"  # flock of the process training the run (seqrec.locks)
TRAIN_LOG = "train-log.jsonl"
#: files and folders ``--fresh`` removes (nothing else in the directory is touched)
DATA = "data.json"  # the fingerprint of the data the run trains on (a changed file is a new run)
RUN_FILES = (
    EXPERIMENT,
    CHECKPOINT,
    "model",
    TRAIN_LOG,
    TRAIN_CURVE,
    "result.json",
    "result.md",
    DATA,
)
#: steps between mid-epoch checkpoints (also saved at every epoch end and validation)
CHECKPOINT_EVERY = 200


def prepare_run_dir(out: Path, exp: Experiment, fresh: bool) -> tuple[bool, IO[str]]:
    """Claim ``out`` for this run: ``(resumable, lock)``, where ``resumable`` says whether an
    earlier attempt of it can be resumed and ``lock`` must stay open while the run trains.

    Raises:
        ConfigError: ``out`` holds another run (naming the differing keys) or files that are
            not a seqrec run, and ``fresh`` is off.
        RunBusy: another ``seqrec train`` works in ``out`` now (two trainers would interleave
            their checkpoints).
    """
    identity = experiment_identity(exp)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file, not a directory")
    if not fresh and out.is_dir() and any(p.name != LOCK for p in out.iterdir()):
        _check_same_run(out, identity, type(exp.model_config()))
    out.mkdir(parents=True, exist_ok=True)
    lock = lock_dir(
        out,
        LOCK,
        f"{out} is in use by another seqrec train (started "
        "earlier and still running); wait for it, or pass --out DIR",
    )
    if fresh:
        for name in RUN_FILES:
            target = out / name
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
    record = {"identity": identity, "command": " ".join(sys.argv)}
    atomic_write(out / EXPERIMENT, lambda fh: fh.write(json.dumps(record, indent=2).encode()))
    return (out / CHECKPOINT / "last.pt").exists(), lock


def check_same_data(
    out: Path, name: str, fingerprint: str, n_users: int, n_items: int, resumable: bool
) -> None:
    """Record the data a run trains on; on a resume, refuse data that changed since (a log
    that grew: its checkpoint has another item count), naming the ways out."""
    path = out / DATA
    if resumable and path.exists():
        try:
            old = json.loads(path.read_text())
        except (OSError, ValueError):
            old = None
        if old is not None and old.get("fingerprint") != fingerprint:
            raise ConfigError(
                f"{name} changed since the run in {out} started ({old.get('n_users')} users and "
                f"{old.get('n_items')} items then, {n_users} and {n_items} now): --fresh retrains "
                "this run on it, --out DIR keeps the old run beside a new one"
            )
    record = {"name": name, "fingerprint": fingerprint, "n_users": n_users, "n_items": n_items}
    atomic_write(path, lambda fh: fh.write(json.dumps(record, indent=2).encode()))


def _check_same_run(out: Path, identity: dict[str, Any], config_cls: type) -> None:
    hint = "pass --out DIR for a new run, or --fresh to start this one over"
    path = out / EXPERIMENT
    if not path.exists():
        raise ConfigError(
            f"{out} already exists and does not hold a seqrec train run (no {EXPERIMENT}); {hint}"
        )
    try:
        old = json.loads(path.read_text())["identity"]
        changed = differences(old, identity, config_cls, training_only=True)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        raise ConfigError(f"{path} is unreadable; {hint}") from None
    if changed and _never_trained(out):
        return  # an attempt stopped by a config or data error before training: nothing to lose
    if changed:
        raise ConfigError(f"{out} holds another run (differs in {', '.join(changed)}); {hint}")


def _never_trained(out: Path) -> bool:
    """Whether ``out`` holds only the claim of a run that never reached training (fit creates
    the checkpoint folder first): e.g. its data file was refused."""
    return not any((out / name).exists() for name in RUN_FILES if name != EXPERIMENT)


class EpochPrinter:
    """``on_epoch`` callback of the CLI: one line per epoch on stderr, terminal or not."""

    def __init__(self, name: str, stream: Any = None) -> None:
        self.name, self.stream = name, stream

    def __call__(self, rec: dict[str, Any]) -> None:
        width = len(str(rec["epochs"]))
        parts = [
            f"{self.name} epoch {rec['epoch']:>{width}}/{rec['epochs']}",
            f"loss {rec['train_loss']:.4f}",
        ]
        if "value" in rec:
            parts.append(f"{rec['metric']} {rec['value']:.4f} (best {rec['best']:.4f})")
        parts.append(f"{rec['seconds']:.1f}s")
        print("  ".join(parts), file=self.stream or sys.stderr, flush=True)


STOP_TEXT = {
    "epochs": "the epoch limit",
    "patience": "patience (no better validation)",
    "time_budget": "the time budget",
    "deadline": "the deadline (unfinished: rerun to resume)",
    "interrupted": "a signal (unfinished: rerun to resume)",
}


def write_train_log(out: Path, model: Any) -> Path | None:
    """``train-log.jsonl``: the epoch records of the last fit (all of them, across resumes)."""
    training_log = getattr(model, "training_log", None)
    if training_log is None:
        return None
    text = "".join(json.dumps(rec) + "\n" for rec in training_log.epoch_log)
    return atomic_write(out / TRAIN_LOG, lambda fh: fh.write(text.encode()))


def write_train_curve(out: Path, epoch_log: list[dict[str, Any]], title: str) -> Path | None:
    """``train-curve.png``: training loss and the validation metric per epoch, the kept (best)
    epoch marked; None without matplotlib (the ``plot`` extra) or without epochs."""
    rows = [r for r in epoch_log if "epoch" in r]
    if not rows:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    epochs = [r["epoch"] for r in rows]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
    ax1.plot(epochs, [r.get("train_loss", float("nan")) for r in rows], marker=".")
    ax1.set(xlabel="epoch", ylabel="training loss", title="training loss")
    valid = [r for r in rows if r.get("value") is not None]
    if valid:
        metric = valid[0].get("metric", "validation metric")
        ax2.plot([r["epoch"] for r in valid], [r["value"] for r in valid], marker=".")
        best = max(valid, key=lambda r: r["value"])
        ax2.scatter(
            [best["epoch"]],
            [best["value"]],
            s=80,
            facecolors="none",
            edgecolors="C3",
            zorder=3,
            label=f"kept: epoch {best['epoch']} ({best['value']:.4f})",
        )
        ax2.legend(loc="best")
        ax2.set(xlabel="epoch", ylabel=f"validation {metric}", title=f"validation {metric}")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    path = out / TRAIN_CURVE
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def publish_dir(staging: Path, final: Path) -> None:
    """Move a finished ``staging`` directory to ``final`` (replacing an older one): a reader
    sees the old complete folder, no folder, or the new complete one, never a partial one."""
    if final.exists():
        old = final.with_name(f".{final.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(final, old)
        os.replace(staging, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(staging, final)
