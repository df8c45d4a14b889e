"""Hyperparameter search with Optuna: ``seqrec tune CONFIG --space SPACE.toml --trials N``
(or ``seqrec tune shop.csv -m sasrec --trials N``: without --space, the model's built-in space).

The study lives in any database Optuna supports (``--storage``, SQLite by default), so several
``seqrec tune`` processes, on one machine or many, started with the same storage and study name
work on one study: each asks the sampler for a trial, trains it and records it there.

* **Search space**: a TOML file whose keys are the dotted config keys of ``--set``, each a table
  ``{type = "float" | "int" | "categorical", low, high, log, step, choices}``::

      "train.lr" = {type = "float", low = 1e-4, high = 1e-2, log = true}
      "model.dim" = {type = "categorical", choices = [32, 64]}
      [model.n_blocks]            # nested tables work too
      type = "int"
      low = 1
      high = 3

* **Sampler / pruner**: TPE; the median pruner on the validation curve. A neural model reports
  its validation metric (``val_metric``) at every validation of the trainer and the trial
  stops as soon as the pruner says so; other models are scored once.
* **Objective**: ``--metric`` (default ``NDCG@10``) of the configured evaluation on the
  validation targets, maximised; the test targets are never looked at.
* **Budget**: ``--trials N`` is the study's total: a process stops when the study holds ``N``
  trials (any state). Processes that start a trial at the same moment can overshoot by at most
  one trial each.
* **Result**: the best trial's config (the base config + ``--set`` + the best parameters) as a
  TOML file that ``seqrec train -c`` reads.
"""

from __future__ import annotations

import logging
import math
import os
import time
import warnings
from pathlib import Path
from typing import Any

from seqrec.config import _read, apply_override, load_experiment
from seqrec.errors import ConfigError

log = logging.getLogger(__name__)

TYPES = ("float", "int", "categorical")


# --- search space -----------------------------------------------------------------------------
def load_space(path: str | Path) -> dict[str, dict[str, Any]]:
    """Dotted key -> distribution spec, validated (unknown fields and bad bounds raise)."""
    tree = _read(Path(path))
    space: dict[str, dict[str, Any]] = {}

    def walk(node: dict[str, Any], prefix: str) -> None:
        for key, value in node.items():
            name = f"{prefix}.{key}" if prefix else key
            if not isinstance(value, dict):
                raise ConfigError(
                    f"search space {path}: {name} must be a table with a 'type', got {value!r}"
                )
            if "type" in value:
                space[name] = _check_spec(name, value)
            else:
                walk(value, name)

    walk(tree, "")
    if not space:
        raise ConfigError(f"search space {path} defines no parameter")
    return space


# The space `seqrec tune` searches without --space: the learning rate and dropout that the
# defaults study (docs/reproduce/defaults.md) varied, over wider ranges than it tried, plus the
# width and depth the papers tune (ranks and scaling for the factorization models); a model
# gets the keys its config has. Layout and training windows are not searched: the study fixed
# them for every dataset it tried.
_DEFAULT_KNOBS: list[tuple[str, str, dict[str, Any]]] = [
    ("lr", "train.lr", {"type": "float", "low": 1e-4, "high": 1e-2, "log": True}),
    ("dropout", "model.dropout", {"type": "float", "low": 0.0, "high": 0.5, "step": 0.1}),
    ("dim", "model.dim", {"type": "categorical", "choices": [32, 64, 128]}),
    ("n_blocks", "model.n_blocks", {"type": "int", "low": 1, "high": 3}),
    ("rank", "model.rank", {"type": "int", "low": 16, "high": 512, "log": True}),
    # SATF: around the authors' Beauty ranks (600-800); clip_ranks lowers them on small data
    ("user_rank", "model.user_rank", {"type": "int", "low": 32, "high": 1024, "log": True}),
    ("item_rank", "model.item_rank", {"type": "int", "low": 32, "high": 1024, "log": True}),
    ("scaling", "model.scaling", {"type": "float", "low": 0.0, "high": 1.0, "step": 0.1}),
]


def default_space(model: str) -> dict[str, dict[str, Any]]:
    """The built-in search space of ``model`` (the knobs of ``_DEFAULT_KNOBS`` its config has)."""

    from seqrec.registry import settings_fields

    fields = settings_fields(model)
    space = {key: dict(spec) for field, key, spec in _DEFAULT_KNOBS if field in fields}
    if not space:
        raise ConfigError(
            f"model {model!r} has no built-in search space (its settings: "
            f"{', '.join(sorted(fields)) or 'none'}); pass --space FILE"
        )
    return space


def space_toml(space: dict[str, dict[str, Any]]) -> str:
    """``space`` as a --space file (one inline table per dotted key)."""
    return "".join(
        f'"{key}" = {{{", ".join(f"{k} = {toml_value(v)}" for k, v in spec.items())}}}\n'
        for key, spec in space.items()
    )


def _check_spec(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    kind = spec["type"]
    allowed = {
        "float": {"type", "low", "high", "log", "step"},
        "int": {"type", "low", "high", "log", "step"},
        "categorical": {"type", "choices"},
    }
    if kind not in TYPES:
        raise ConfigError(f"{name}: type must be one of {', '.join(TYPES)}, got {kind!r}")
    unknown = set(spec) - allowed[kind]
    if unknown:
        raise ConfigError(
            f"{name}: unknown field(s) {', '.join(sorted(unknown))} for type {kind!r}; "
            f"allowed: {', '.join(sorted(allowed[kind]))}"
        )
    if kind == "categorical":
        if not isinstance(spec.get("choices"), list) or not spec["choices"]:
            raise ConfigError(f"{name}: categorical needs a non-empty 'choices' list")
        return dict(spec)
    if "low" not in spec or "high" not in spec or not spec["low"] < spec["high"]:
        raise ConfigError(
            f"{name}: needs low < high, got low={spec.get('low')!r} high={spec.get('high')!r}"
        )
    if spec.get("log") and spec["low"] <= 0:
        raise ConfigError(f"{name}: log scale needs low > 0, got {spec['low']!r}")
    return dict(spec)


def suggest(trial: Any, space: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One value per key from the Optuna ``trial``."""
    out: dict[str, Any] = {}
    for name, spec in space.items():
        kind = spec["type"]
        if kind == "categorical":
            out[name] = trial.suggest_categorical(name, spec["choices"])
        elif kind == "int":
            out[name] = trial.suggest_int(
                name,
                int(spec["low"]),
                int(spec["high"]),
                step=int(spec.get("step", 1)),
                log=bool(spec.get("log", False)),
            )
        else:
            out[name] = trial.suggest_float(
                name,
                float(spec["low"]),
                float(spec["high"]),
                step=spec.get("step"),
                log=bool(spec.get("log", False)),
            )
    return out


# --- TOML out ---------------------------------------------------------------------------------
def toml_value(value: Any) -> str:
    """A TOML literal (also a valid ``--set`` value)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigError(f"cannot write {value!r} to TOML")
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise ConfigError(f"cannot write a {type(value).__name__} to TOML: {value!r}")


def dump_toml(tree: dict[str, Any], header: str = "") -> str:
    """Scalars first, then one ``[section]`` per nested table (two levels, as configs have)."""
    lines = [f"# {line}" for line in header.splitlines()]
    scalars = {k: v for k, v in tree.items() if not isinstance(v, dict)}
    lines += [f"{k} = {toml_value(v)}" for k, v in scalars.items()]
    for section, body in tree.items():
        if not isinstance(body, dict):
            continue
        lines += ["", f"[{section}]"]
        for k, v in body.items():
            if isinstance(v, dict):
                raise ConfigError(f"config section [{section}] has a nested table {k!r}")
            lines.append(f"{k} = {toml_value(v)}")
    return "\n".join(lines) + "\n"


def trial_overrides(params: dict[str, Any]) -> list[str]:
    return [f"{k}={toml_value(v)}" for k, v in params.items()]


def config_tree(config: str | Path | None, overrides: list[str]) -> dict[str, Any]:
    """The config file's tree with ``--set`` assignments applied (what ``load_experiment``
    builds the experiment from)."""
    tree: dict[str, Any] = _read(Path(config)) if config else {}
    for assignment in overrides:
        apply_override(tree, assignment)
    return tree


# --- the study --------------------------------------------------------------------------------
# A trial whose process was killed (Ctrl-C twice, a lost machine) stays RUNNING in the database
# forever; with a heartbeat, the next process to run a trial marks it failed once its heartbeat
# is this old and re-runs its parameters once (RetryFailedTrialCallback).
HEARTBEAT_SECONDS = 60
STALE_AFTER_SECONDS = 180


def _retry_stale_trials(optuna: Any) -> dict[str, Any]:
    """The storage argument that re-runs a stale trial once (renamed in Optuna 4.9)."""
    import inspect

    if "heartbeat_stale_trial_callback" in inspect.signature(optuna.storages.RDBStorage).parameters:
        return {
            "heartbeat_stale_trial_callback": optuna.storages.RetryHeartbeatStaleTrialCallback(
                max_retry=1
            )
        }
    return {"failed_trial_callback": optuna.storages.RetryFailedTrialCallback(max_retry=1)}


def open_study(
    storage: str,
    name: str,
    seed: int | None = None,
    startup_trials: int = 5,
    heartbeat: int = HEARTBEAT_SECONDS,
    stale_after: int = STALE_AFTER_SECONDS,
):
    """Create or join the study ``name`` in ``storage`` (TPE sampler, median pruner).

    Several processes may call this at once on a fresh SQLite file: table creation and study
    creation races are retried. Trials send a heartbeat every ``heartbeat`` seconds; one silent
    for ``stale_after`` seconds (its process died) is marked failed and retried once."""
    import optuna

    if "://" not in storage:
        raise ConfigError(f"storage must be a database URL like sqlite:///tune.db, got {storage!r}")
    kwargs = {"connect_args": {"timeout": 120}} if storage.startswith("sqlite") else {}
    if storage.startswith("sqlite:///"):
        Path(storage[len("sqlite:///") :]).expanduser().parent.mkdir(parents=True, exist_ok=True)
    sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup_trials)
    pruner = optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=1)
    last: Exception | None = None
    for attempt in range(8):
        try:
            with warnings.catch_warnings():  # heartbeats are "experimental" in Optuna's terms
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                rdb = optuna.storages.RDBStorage(
                    storage,
                    engine_kwargs=kwargs,
                    heartbeat_interval=heartbeat,
                    grace_period=stale_after,
                    **_retry_stale_trials(optuna),
                )
            return optuna.create_study(
                storage=rdb,
                study_name=name,
                direction="maximize",
                sampler=sampler,
                pruner=pruner,
                load_if_exists=True,
            )
        except Exception as exc:  # noqa: BLE001 - concurrent creation: table/study exists
            last = exc
            time.sleep(0.2 * (attempt + 1))
    raise ConfigError(f"cannot open study {name!r} in {storage}: {last}")


class Objective:
    """Train and validate one trial; prepared data are reused while the data config is equal."""

    def __init__(
        self,
        config: str | Path | None,
        overrides: list[str],
        space: dict[str, dict[str, Any]],
        metric: str,
    ) -> None:
        self.config, self.overrides, self.space, self.metric = (
            config,
            list(overrides),
            space,
            metric,
        )
        self._data: tuple[Any, Any] | None = None
        # fail now, not in trial 0, on a key no config has or a value out of range
        for spec_values in (_corner(space, 0), _corner(space, -1)):
            load_experiment(config, self.overrides + trial_overrides(spec_values))

    def experiment(self, params: dict[str, Any]):
        return load_experiment(self.config, self.overrides + trial_overrides(params))

    def __call__(self, trial: Any) -> float:
        from seqrec.experiment import build_model, evaluate_model, prepare_data

        params = suggest(trial, self.space)
        trial.set_user_attr("worker", f"{os.uname().nodename}:{os.getpid()}")  # pruned ones too
        exp = self.experiment(params)
        key = (exp.data, exp.split)
        if self._data is None or self._data[0] != key:
            self._data = (key, prepare_data(exp))
        split = self._data[1].split
        model = build_model(exp)
        _report_validations(model, trial)
        t0 = time.perf_counter()
        model.fit(split.train, split.valid)
        trial.set_user_attr("train_seconds", time.perf_counter() - t0)
        epochs = getattr(model, "epochs_trained", None)
        if epochs is not None:
            trial.set_user_attr("epochs", int(epochs))
        metrics = evaluate_model(model, exp, split.valid).metrics
        if self.metric not in metrics:
            raise ConfigError(f"metric {self.metric!r} not among {sorted(metrics)}")
        return float(metrics[self.metric])


def _corner(space: dict[str, dict[str, Any]], end: int) -> dict[str, Any]:
    out = {}
    for name, spec in space.items():
        if spec["type"] == "categorical":
            out[name] = spec["choices"][end]
        else:
            value = spec["low"] if end == 0 else spec["high"]
            out[name] = int(value) if spec["type"] == "int" else float(value)
    return out


def _report_validations(model: Any, trial: Any) -> None:
    """Report every trainer validation to ``trial`` and prune through it (neural models)."""
    import optuna

    inner = getattr(model, "validation_metrics", None)
    if inner is None:
        return
    name = model.settings.val_metric
    count = [0]

    def reported(valid):
        metrics = inner(valid)
        trial.report(float(metrics[name]), count[0])
        count[0] += 1
        if trial.should_prune():
            raise optuna.TrialPruned(f"pruned at validation {count[0]}: {name} {metrics[name]:.4f}")
        return metrics

    model.validation_metrics = reported


def tune(
    config: str | Path | None,
    overrides: list[str],
    space_path: str | Path | dict,
    trials: int,
    storage: str,
    study_name: str,
    metric: str = "NDCG@10",
    seed: int | None = None,
    startup_trials: int = 5,
):
    """Run trials until the study holds ``trials`` of them; returns the study. ``space_path``
    is a --space file or an already built space (``default_space``)."""
    import optuna
    from optuna.study import MaxTrialsCallback

    if trials < 1:
        raise ConfigError(f"--trials must be >= 1, got {trials}")
    if isinstance(space_path, dict):
        space = {name: _check_spec(name, spec) for name, spec in space_path.items()}
    else:
        space = load_space(space_path)
    objective = Objective(config, overrides, space, metric)
    study = open_study(storage, study_name, seed, startup_trials)
    if len(study.trials) < trials:
        study.optimize(
            objective,
            n_trials=trials,
            callbacks=[MaxTrialsCallback(trials, states=None)],
            catch=(FloatingPointError,),
        )
    if not any(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials):
        raise ConfigError(f"study {study_name!r} has no completed trial")
    return study


def write_best(
    study: Any, config: str | Path | None, overrides: list[str], path: str | Path
) -> Path:
    """The best trial's full config as TOML (``seqrec train -c`` reads it)."""
    best = study.best_trial
    tree = config_tree(config, overrides + trial_overrides(best.params))
    load_experiment(None, trial_overrides(_flatten(tree)))  # it must load back
    header = (
        f"best trial {best.number} of study {study.study_name!r}: "
        f"{best.value:.6f} on the validation targets\n"
        f"from {config or '(defaults)'} with {' '.join(overrides) or 'no --set'}\n"
        f"parameters: {best.params}"
    )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump_toml(tree, header))
    return path


def _flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out = {}
    for k, v in tree.items():
        name = f"{prefix}.{k}" if prefix else k
        out.update(_flatten(v, name) if isinstance(v, dict) else {name: v})
    return out
