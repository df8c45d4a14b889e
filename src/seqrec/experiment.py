"""The main job: data -> preprocess -> split -> fit -> evaluate -> result record.

Used by the CLI (``seqrec train``, ``seqrec demo``) and by benchmarks; plain functions, no
terminal output (the CLI owns the terminal).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seqrec.config import Experiment
from seqrec.data.preprocess import Prepared, preprocess
from seqrec.data.splits import Split, item_cold_split, leave_last_out, temporal_split
from seqrec.errors import DataError
from seqrec.models.base import Recommender

log = logging.getLogger(__name__)


@dataclass
class PreparedSplit:
    """Data ready for fitting, with how long each stage took."""

    prepared: Prepared
    split: Split
    seconds: dict[str, float]


def prepare_data(exp: Experiment, interactions: Any = None) -> PreparedSplit:
    """Load ``exp.data`` (or take ``interactions`` already read, e.g. from a DataFrame by
    :func:`seqrec.train`), preprocess it and split it by ``exp.split``."""
    from seqrec.data.parquet import LAZY_UNITS, NeedsEagerRead, is_parquet, prepare_parquet
    from seqrec.data.sources import load

    t0 = time.perf_counter()
    if interactions is not None:
        t1 = time.perf_counter()
        prepared = preprocess(interactions, exp.data.preprocess_config())
    else:
        options = exp.data.read_options()
        prepared = None
        # Parquet is read and preprocessed lazily, never loaded whole, with the column mapping
        # and time unit asked; what the lazy path cannot follow (text times, an item file)
        # goes through the eager reader
        if (
            is_parquet(exp.data.name)
            and set(options) <= {"columns", "timestamp_unit"}
            and "event" not in options.get("columns", {})
            and options.get("timestamp_unit", "auto") in LAZY_UNITS
        ):
            try:
                prepared = prepare_parquet(exp.data.name, exp.data.preprocess_config(), **options)
            except NeedsEagerRead:
                prepared = None
        t1 = time.perf_counter()
        if prepared is None:
            inter = load(exp.data.name, root=exp.data.root, **options)
            t1 = time.perf_counter()
            prepared = preprocess(inter, exp.data.preprocess_config())
    seqs = prepared.sequences()
    t2 = time.perf_counter()
    if exp.split.protocol == "temporal":
        split = temporal_split(seqs, exp.split.valid, exp.split.test)
    elif exp.split.protocol == "item-cold":
        split = item_cold_split(seqs, exp.split.cold_share, exp.seed)
    else:
        split = leave_last_out(seqs)
    _check_targets(split, seqs, exp.data.name)
    t3 = time.perf_counter()
    return PreparedSplit(
        prepared, split, {"load": t1 - t0, "preprocess": t2 - t1, "split": t3 - t2}
    )


def _check_targets(split, seqs, name: str) -> None:
    """A split without validation or test targets cannot be evaluated: say why before training
    (the evaluator's own "no targets" came after the whole fit)."""
    for which, targets in (("validation", split.valid), ("test", split.test)):
        if len(targets) == 0:
            longest = int(seqs.lengths.max()) if len(seqs) else 0
            need = (
                "leave-last-out needs users with at least 3 interactions (train, validation, test)"
                if split.protocol in ("leave-last-out", "item-cold")
                else "the temporal split needs interactions after its validation and test cut-offs "
                "(split.valid, split.test)"
            )
            raise DataError(
                f"the {split.protocol} split of {name!r} has no {which} targets "
                f"({len(seqs)} users after preprocessing, the longest history "
                f"{longest} interactions): {need}"
            )


def _check_training_pairs(split, model: Recommender, name: str) -> None:
    """A sequential model learns from (item, next item) pairs of the training sequences: with
    none, say why in the split's terms (the trainer alone can only say there is nothing)."""
    from seqrec.models.torch_recommender import TorchRecommender

    train = split.train
    if not isinstance(model, TorchRecommender) or (len(train) and int(train.lengths.max()) >= 2):
        return
    longest = int(train.lengths.max()) if len(train) else 0
    held = (
        "leave-last-out holds out each user's last two interactions (validation, test), so a "
        "user needs at least 4 to leave a training pair"
        if split.protocol in ("leave-last-out", "item-cold")
        else "the temporal split keeps only interactions before its validation cut-off for training"
    )
    raise DataError(
        f"no training sequence of {name!r} has 2 items to learn a next item from (the "
        f"longest has {longest}): {held}; {model.name} cannot train here (pop and "
        f"puresvd can)"
    )


def build_model(exp: Experiment) -> Recommender:
    from seqrec.registry import get_model

    _, model_cls = get_model(exp.model)
    return model_cls(exp.model_config())


def refit_model(model: Recommender) -> Recommender:
    """A fresh model for the refit on train + validation (the temporal protocol's ``refit``).

    No validation targets remain for the refit, so a model that stopped early on validation
    trains for the number of epochs validation selected (its best epoch), not for its configured
    maximum, which would train far past the selected point; models without epochs (closed form)
    are rebuilt from the same config."""
    import dataclasses

    config = model.settings
    best = getattr(getattr(model, "training_log", None), "best_epoch", None)
    if best and "epochs" in {f.name for f in dataclasses.fields(config)}:
        config = dataclasses.replace(config, epochs=int(best))
    return type(model)(config)


def evaluate_model(
    model: Recommender, exp: Experiment, targets, progress: bool = False, fit_data=None
):
    """Evaluate with the experiment's ``[eval]`` settings; ``fit_data`` (the sequences the model
    was fitted on) is needed for ``eval.coverage = "fit_items"``."""
    from seqrec.evaluation import evaluate

    coverage_items = None
    if exp.eval.coverage == "fit_items":
        if fit_data is None:
            from seqrec.errors import ConfigError

            raise ConfigError("eval.coverage = 'fit_items' needs the data the model was fitted on")
        coverage_items = int((fit_data.item_counts()[1:] > 0).sum())
    window = getattr(model.config, "max_len", None)
    return evaluate(
        model,
        targets,
        ks=exp.eval.ks,
        seen_filter=exp.eval.seen_filter,
        window=window if exp.eval.seen_filter == "window" else None,
        average=exp.eval.average,
        chunk_size=exp.eval.chunk_size,
        progress=progress,
        coverage_items=coverage_items,
    )


def run_experiment(
    exp: Experiment,
    data: PreparedSplit | None = None,
    progress: bool = False,
    save_dir: str | Path | None = None,
    fit_options: dict[str, Any] | None = None,
) -> tuple[Recommender, dict[str, Any]]:
    """Fit ``exp.model`` and evaluate it on validation and test; returns (model, record).

    ``fit_options`` go to ``model.fit`` where its signature takes them (neural models:
    ``checkpoint_dir``, ``on_epoch``, ...); the refit of the temporal protocol checkpoints
    into ``<checkpoint_dir>/refit``. The record says why training stopped (``stopped``:
    'epochs', 'patience', 'time_budget'; None for models fitted in closed form).

    Under ``torchrun`` every rank fits (data-parallel) and only rank 0 evaluates, saves and
    gets a record; the other ranks get ``(model, None)``.
    """
    from seqrec.evaluation.results import result_record

    data = data or prepare_data(exp)
    split = data.split
    model = build_model(exp)
    _check_training_pairs(split, model, exp.data.name)
    t0 = time.perf_counter()
    model.fit(split.train, split.valid, **_fit_kwargs(model, fit_options))
    train_seconds = _fit_seconds(model, time.perf_counter() - t0)
    main = _is_main_process()
    valid = (
        evaluate_model(model, exp, split.valid, progress, fit_data=split.train) if main else None
    )
    training = _training_info(model)
    if exp.split.refit:
        t0 = time.perf_counter()
        model = refit_model(model)  # neural: for the epochs validation selected
        refit_options = dict(fit_options or {})
        if refit_options.get("checkpoint_dir") is not None:
            refit_options["checkpoint_dir"] = Path(refit_options["checkpoint_dir"]) / "refit"
        model.fit(split.train_valid, None, **_fit_kwargs(model, refit_options))
        train_seconds += time.perf_counter() - t0
    if not main:
        return model, None
    test = evaluate_model(
        model,
        exp,
        split.test,
        progress,
        fit_data=split.train_valid if exp.split.refit else split.train,
    )
    results = {"valid": valid, "test": test}
    if split.cold_items is not None:  # item-cold: the held-out items' targets, and the others
        fit = split.train_valid if exp.split.refit else split.train
        for name, cold in (("test_cold", True), ("test_warm", False)):
            part = split.cold_targets(split.test, cold)
            if len(part):
                results[name] = evaluate_model(model, exp, part, progress, fit_data=fit)
    record = result_record(
        model=exp.model,
        variant=getattr(model.settings, "loss", None) or getattr(model.config, "variant", None),
        dataset=exp.data.name,
        fingerprint=data.prepared.fingerprint(),
        protocol=split.protocol,
        results=results,
        seed=exp.seed,
        config=exp.to_dict() | {"model_config": _config_dict(model.settings)},
        epochs=getattr(model, "epochs_trained", None),
        train_seconds=train_seconds,
        split_info=split.info,
        data_seconds=data.seconds,
        preprocessing=list(data.prepared.interactions.notes),
        stopped=stop_reason(model),
        **({"training": training} if training else {}),
    )
    if save_dir is not None:
        from seqrec.serving.histories import UserHistories

        model.user_histories = UserHistories.from_prepared(data.prepared)
        model.save(save_dir)
    return model, record


def _is_main_process() -> bool:
    """Rank 0 under torchrun (it evaluates and writes), or a lone process. Asks
    ``torch.distributed`` only if a model already imported it (factorization models never
    import torch)."""
    dist = sys.modules.get("seqrec.training.distributed")
    if dist is not None:
        return dist.is_main_process()
    return int(os.environ.get("RANK", "0")) == 0


def _fit_seconds(model: Recommender, wall: float) -> float:
    """Seconds the fit took over all its segments: this process's, plus the earlier segments'
    of a resumed run, which its training log carries from the checkpoint."""
    log_ = getattr(model, "training_log", None)
    return wall + getattr(log_, "earlier_wall_seconds", 0.0)


def _training_info(model: Recommender) -> dict[str, Any] | None:
    """Processes, global / per-rank batch and the learning rate used (neural models)."""
    log_ = getattr(model, "training_log", None)
    if log_ is None or not hasattr(log_, "world_size"):
        return None
    cfg = model.settings
    batch = getattr(model, "train_batch_size", None) or cfg.batch_size  # batch_targets sets it
    return {
        "world_size": log_.world_size,
        "global_batch": batch,
        "per_rank_batch": -(-batch // log_.world_size),
        "lr_rule": getattr(cfg, "lr_rule", "fixed"),
        "lr": log_.lr,
    }


def _config_dict(config: Any) -> dict[str, Any]:
    from seqrec.config_fields import config_to_dict

    return config_to_dict(config)


def stop_reason(model: Recommender) -> str | None:
    """Why the last fit stopped: 'epochs', 'patience' or 'time_budget' (neural models);
    None for models without an iterative budget."""
    training_log = getattr(model, "training_log", None)
    return None if training_log is None else training_log.stopped


def _fit_kwargs(model: Recommender, options: dict[str, Any] | None) -> dict[str, Any]:
    """The ``options`` that ``model.fit`` accepts (factorization models take none)."""
    import inspect

    if not options:
        return {}
    accepted = inspect.signature(model.fit).parameters
    return {k: v for k, v in options.items() if k in accepted}
