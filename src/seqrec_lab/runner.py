"""Run one reproduction run, resumably, and cache its result by what it computes.

A run's *identity* is what determines its numbers: the data/split/eval sections, the full model
config (run-control fields such as ``num_threads`` excluded), the processed data's fingerprint
and the code version (``seqrec.__version__`` plus the model class's ``revision``, bumped when a
model's behaviour changes). Its *key* (16 hex of a sha256 of the identity without the budget
fields ``epochs`` / ``patience`` / ``max_train_seconds``) names its checkpoint directory
``<runs_dir>/<key>`` and its result file ``<results_dir>/<key>.json``, which is written
atomically when the run finishes. A finished result whose full identity (budget included)
matches is reused: nothing trains. A larger budget resumes the checkpoint; other evaluation
settings (``[eval]``) reuse it too (the key leaves them out) and only evaluate again. An unfinished run
(stopped by the harness's time budget, or by SIGINT / SIGTERM) writes ``<key>.partial.json`` with the best weights
so far, and the same command continues it.

Identity, key and the comparison of runs are :mod:`seqrec.identity`'s (the same rule as
checkpoints and ``seqrec train`` run directories).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from pathlib import Path
from typing import Any

from seqrec import stop
from seqrec.atomic import atomic_write
from seqrec_lab.spec import RunSpec
from seqrec_lab.store import (  # noqa: F401 - re-exported: the harness and tests use them here
    _DATA_CACHE,
    BudgetSpent,
    RunBusy,
    _lock,
    breakdown,
    is_training,
    n_params,
    pack_checkpoint,
    popularity_groups,
    prepared_data,
    unpack_checkpoint,
    write_record,
)

log = logging.getLogger(__name__)

CHECKPOINT_EVERY = 25  # steps between checkpoints, besides every epoch end and validation


def code_version(model_name: str) -> str:
    from seqrec import __version__
    from seqrec.registry import get_model

    _, cls = get_model(model_name)
    return f"{__version__}/{cls.__name__}.r{getattr(cls, 'revision', 1)}"


def config_class(model_name: str) -> type:
    """The config class of a seqrec model or of a peer row."""
    from seqrec_lab import peers

    if peers.is_peer(model_name):
        return peers.PeerConfig
    from seqrec.registry import settings_class

    return settings_class(model_name)


def identity(spec: RunSpec, fingerprint: str | None) -> dict[str, Any]:
    """Everything that determines the run's numbers, budget included
    (:func:`seqrec.identity.experiment_identity` with the eval section, fingerprint and code)."""
    from seqrec.identity import experiment_identity
    from seqrec_lab import peers

    exp = spec.experiment
    if peers.is_peer(exp.model):
        return peers.identity(spec, fingerprint)
    return experiment_identity(
        exp, with_eval=True, fingerprint=fingerprint, code=code_version(exp.model)
    )


def run_key(ident: dict[str, Any]) -> str:
    """:func:`seqrec.identity.run_key` of a stored or planned identity."""
    from seqrec.identity import run_key as key

    return key(ident, config_class(ident["model"]))


def compatible(stored: dict[str, Any], current: dict[str, Any], budget: bool = True) -> bool:
    """:func:`seqrec.identity.same_run` (``budget=False``: training only, as the key)."""
    from seqrec.identity import same_run

    return same_run(stored, current, config_class(current["model"]), training_only=not budget)


# --- executing a run --------------------------------------------------------------------------
STATE_FILES = ("last.pt", "run.json", "identity.json", "validation.jsonl")
# The checkpoint is kept xz-compressed in the state dir, its bytes first split into the four
# byte planes of float32 words (see ``pack_checkpoint``): the planes of signs and exponents are
# nearly constant and compress well, where interleaved with the mantissas they do not (plain xz
# saves little on float weights). ``last.pt`` (uncompressed) and plain-xz packs are still read.
PACKED_CHECKPOINT = "last.pt.xz"
PACK_MAX_RAW_BYTES = 10_000_000
"""Checkpoints larger than this are copied plain: xz at this size takes tens of seconds of a
busy core, longer than a stop's grace period."""


def _state_checkpoint(src: Path) -> Path | None:
    """The state's checkpoint file: the packed or the plain one, the newer when both exist."""
    found = [f for f in (src / PACKED_CHECKPOINT, src / "last.pt") if f.exists()]
    return max(found, key=lambda f: f.stat().st_mtime_ns) if found else None


def resume_source(run_dir: Path, state_dir: Path | None) -> tuple[Path, int] | None:
    """The checkpoint an unfinished run would resume from here, and its size in bytes: its own
    run directory's first, else the saved state (None: it would start over)."""
    own = run_dir / "last.pt"
    found = (
        own
        if own.exists()
        else None
        if state_dir is None
        else _state_checkpoint(state_dir / run_dir.name)
    )
    return None if found is None else (found, found.stat().st_size)


def restore_state(run_dir: Path, state_dir: Path | None) -> bool:
    """Seed an absent checkpoint directory from the saved state of an unfinished run."""
    src = None if state_dir is None else state_dir / run_dir.name
    ckpt = None if src is None else _state_checkpoint(src)
    if ckpt is None or (run_dir / "last.pt").exists():
        return False
    run_dir.mkdir(parents=True, exist_ok=True)
    for name in STATE_FILES:
        origin = ckpt if name == "last.pt" else src / name
        if origin.exists():
            data = origin.read_bytes()
            if origin.name == PACKED_CHECKPOINT:
                data = unpack_checkpoint(data)
            atomic_write(run_dir / name, lambda fh, data=data: fh.write(data))
    log.info("resuming %s from the saved state in %s", run_dir.name, src)
    return True


def save_state(run_dir: Path, state_dir: Path | None, finished: bool) -> None:
    """Keep an unfinished run's checkpoint in the local state dir (xz-compressed), where it
    survives the run directory being cleaned; a finished run's state is dropped, its record is
    the cache. The state dir is never committed (see :func:`seqrec_lab.harness.default_state_dir`)."""
    if state_dir is None:
        return
    dst = state_dir / run_dir.name
    if finished:
        for name in (*STATE_FILES, PACKED_CHECKPOINT):
            (dst / name).unlink(missing_ok=True)
        if dst.exists() and not any(dst.iterdir()):
            dst.rmdir()
        return
    for name in STATE_FILES:
        if not (run_dir / name).exists():
            continue
        data = (run_dir / name).read_bytes()
        if name == "last.pt":
            if len(data) <= PACK_MAX_RAW_BYTES:
                data = pack_checkpoint(data)
                atomic_write(dst / PACKED_CHECKPOINT, lambda fh, data=data: fh.write(data))
                (dst / "last.pt").unlink(missing_ok=True)  # a plain one left by older code
            else:
                atomic_write(dst / "last.pt", lambda fh, data=data: fh.write(data))
                (dst / PACKED_CHECKPOINT).unlink(missing_ok=True)  # an older packed one
        else:
            atomic_write(dst / name, lambda fh, data=data: fh.write(data))


def execute(
    spec: RunSpec,
    key: str,
    ident: dict[str, Any],
    runs_dir: Path,
    results_dir: Path,
    threads: int = 1,
    deadline: float | None = None,
    command: str = "",
    state_dir: Path | None = None,
    first: bool = False,
) -> dict[str, Any]:
    """Train (or resume) and evaluate one run; write its record atomically and return it.

    With ``state_dir`` an unfinished run's checkpoint is copied there when the run stops
    (deadline, or a stop request: :mod:`seqrec.stop`), and a missing checkpoint directory is seeded from it first. Once the deadline
    has passed no run starts (``BudgetSpent``), except a ``first`` one, which trains at least one
    step, so that any budget makes progress; once a stop was requested none starts at all
    (``stop.Interrupted``)."""
    import resource

    import torch

    from seqrec.evaluation.results import result_record
    from seqrec.experiment import evaluate_model, refit_model
    from seqrec.models.base import config_to_dict
    from seqrec.models.torch_recommender import TorchRecommender
    from seqrec.registry import get_model

    if stop.requested():
        raise stop.Interrupted(f"{spec.run_id} seed {spec.seed}: not started, a stop was requested")
    from seqrec_lab import peers

    if peers.is_peer(spec.model):  # another library's model, in its own venv (see peers.py)
        return peers.execute(
            spec, key, ident, runs_dir, results_dir, threads, deadline, command, state_dir, first
        )
    if deadline is not None and not first and time.time() >= deadline:
        raise BudgetSpent(f"{spec.run_id} seed {spec.seed}: not started, the time budget is spent")
    if threads:
        torch.set_num_threads(threads)
    t_start = time.perf_counter()
    data = prepared_data(spec)
    split, exp = data.split, spec.experiment
    _, model_cls = get_model(exp.model)
    cfg = exp.model_config()
    if threads and "num_threads" in {f.name for f in dataclasses.fields(cfg)}:
        cfg = dataclasses.replace(cfg, num_threads=threads)
    run_dir = runs_dir / key
    run_dir.mkdir(parents=True, exist_ok=True)
    with _lock(run_dir):  # one process per run: two tables sharing a run never train it twice
        restore_state(run_dir, state_dir)
        atomic_write(
            run_dir / "identity.json",
            lambda fh: fh.write(json.dumps({"key": key, "identity": ident}, indent=2).encode()),
        )
        model = model_cls(cfg)
        t0 = time.perf_counter()
        neural = isinstance(model, TorchRecommender)
        with peers.LoadSampler() as load:
            if neural:
                model.fit(
                    split.train,
                    split.valid,
                    checkpoint_dir=run_dir,
                    checkpoint_every=CHECKPOINT_EVERY,
                    progress=False,
                    deadline=deadline,
                )
            else:
                model.fit(split.train, split.valid)
        fit_wall = time.perf_counter() - t0
        tlog = getattr(model, "training_log", None)
        # a deadline and a stop request (signal) both leave an unfinished run: same partial record
        partial = tlog is not None and getattr(tlog, "stopped", None) in ("deadline", "interrupted")
        valid = evaluate_model(model, exp, split.valid, fit_data=split.train)
        if exp.split.refit and not partial:
            t0 = time.perf_counter()
            model = refit_model(model)  # neural: for the epochs validation selected
            model.fit(split.train_valid, None)
            fit_wall += time.perf_counter() - t0
        refitted = exp.split.refit and not partial
        test = evaluate_model(
            model, exp, split.test, fit_data=split.train_valid if refitted else split.train
        )
        history = list(getattr(tlog, "history", []) or [])
        train_seconds = getattr(tlog, "train_seconds", None) if tlog is not None else fit_wall
        steps = getattr(tlog, "global_step", 0) if tlog is not None else 0
        record = result_record(
            model=exp.model,
            variant=getattr(cfg, "loss", None) or getattr(cfg, "variant", None),
            dataset=exp.data.name,
            fingerprint=ident["fingerprint"],
            protocol=split.protocol,
            results={"valid": valid, "test": test},
            seed=exp.seed,
            config=exp.to_dict() | {"model_config": config_to_dict(cfg)},
            epochs=getattr(model, "epochs_trained", None),
            train_seconds=train_seconds,
            key=key,
            identity=ident,
            code_version=ident["code"],
            partial=partial,
            stopped=getattr(tlog, "stopped", "fitted") if tlog is not None else "fitted",
            best_epoch=getattr(tlog, "best_epoch", None),
            best_valid=getattr(tlog, "best_metric", None),
            val_metric=getattr(cfg, "val_metric", None),
            global_step=steps,
            step_seconds=(train_seconds / steps) if steps else None,
            fit_wall_seconds_this_process=fit_wall,
            wall_seconds_this_process=time.perf_counter() - t_start,
            params=n_params(model),
            validation_history=history,
            breakdown=breakdown(
                split, {"valid": split.valid, "test": split.test}, {"valid": valid, "test": test}
            ),
            data={
                "users": data.prepared.n_users,
                "items": data.prepared.n_items,
                "interactions": len(data.prepared.interactions),
                "preprocessing": list(data.prepared.interactions.notes),
            },
            split_info=split.info,
            data_seconds=data.seconds,
            torch_threads=threads,
            coverage_denominator={
                "valid": valid.coverage_denominator,
                "test": test.coverage_denominator,
            },
            # the process's peak so far: a worker that ran an earlier run reports that run's peak too
            peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            load_average=load.summary(),
            refit_epochs=getattr(model.settings, "epochs", None) if refitted else None,
        )
        record["command"] = command or record["command"]
        write_record(record, results_dir, key, partial)
        if neural:
            save_state(run_dir, state_dir, finished=not partial)
        return record
