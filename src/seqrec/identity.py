"""Run identity: "is this the same run?", answered once for checkpoints, ``seqrec train`` run
directories and the reproduction cache.

A run's *identity* is a JSON-ready dict: ``model`` (registry name), ``model_config`` (every
field of the model's config except the :data:`~seqrec.config_fields.PLACEMENT` ones, which
never change what a run computes) and whatever context the caller knows (``data``, ``split``,
``eval``, ``seed``, the data ``fingerprint``, the ``code`` version, a checkpoint's ``n_items``).

Two identities are the same run (:func:`same_run`) when the context agrees and the model
configs agree field by field, where

- a field a stored identity lacks (it was recorded before the field existed) reads as the value
  older runs trained with: the field's declared ``legacy`` value, else its default
  (:func:`seqrec.config_fields.stored_default`);
- fields that are inert on both sides (``inert_when``) are skipped;
- with ``training_only`` the :data:`~seqrec.config_fields.BUDGET` fields and the ``eval``
  section are left out too: what the weights depend on, so a larger budget or another
  evaluation continues the same checkpoint.

:func:`run_key` names a run's checkpoint directory and result file: 16 hex digits of a sha256 of
the training-only identity.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

from seqrec.config_fields import (
    BUDGET,
    PLACEMENT,
    config_to_dict,
    inert_fields,
    role,
    stored_default,
)

EVAL_SECTION = "eval"
"""The identity section that changes results but not training (left out of the key)."""


def _json(obj: Any) -> Any:
    return json.loads(json.dumps(obj, default=str))  # the form it has once stored


def _flat_class(config_cls: type | None) -> type | None:
    """The flat settings class identities compare with (a neural model's config class alone
    lacks the training and run fields)."""
    if config_cls is None:
        return None
    from seqrec.models.neural_config import settings_class

    return settings_class(config_cls)


def model_identity(config: Any) -> dict[str, Any]:
    """The ``model_config`` part of an identity: the flat settings' fields (a neural model's
    config alone stands for itself with its default training and run configs), placement
    left out."""
    from seqrec.models.neural_config import flat_settings

    config = flat_settings(config)
    cls = type(config)
    return {k: v for k, v in sorted(config_to_dict(config).items()) if role(cls, k) != PLACEMENT}


def run_identity(model: str, config: Any, **context: Any) -> dict[str, Any]:
    """The identity of a run of ``model`` with ``config``; ``context`` adds the other sections
    (``data``, ``split``, ``eval``, ``seed``, ``fingerprint``, ``code``, ``n_items``, ...)."""
    return _json({"model": model, "model_config": model_identity(config), **context})


def experiment_identity(
    exp: Any, *, with_eval: bool = False, config: Any = None, **context: Any
) -> dict[str, Any]:
    """:func:`run_identity` of a :class:`seqrec.config.Experiment`: its model and model config
    (or ``config``), data (read keys only when set), split and seed, plus its ``eval`` section
    when ``with_eval``."""
    sections: dict[str, Any] = {"data": exp.data.identity(), "split": exp.split.identity()}
    if with_eval:
        sections[EVAL_SECTION] = dataclasses.asdict(exp.eval)
    sections["seed"] = exp.seed
    return run_identity(
        exp.model, exp.model_config() if config is None else config, **sections, **context
    )


def training_part(ident: dict[str, Any], config_cls: type | None) -> dict[str, Any]:
    """What a run's weights depend on: the identity without the ``eval`` section and the
    budget fields."""
    config_cls = _flat_class(config_cls)
    out = {k: v for k, v in ident.items() if k != EVAL_SECTION}
    if "model_config" in ident:
        out["model_config"] = {
            k: v
            for k, v in ident["model_config"].items()
            if config_cls is None
            or role(config_cls, k) != BUDGET
            or k not in config_cls.__dataclass_fields__
        }
    return out


def run_key(ident: dict[str, Any], config_cls: type | None) -> str:
    """The run's key: names its checkpoint directory and its result file."""
    return digest(training_part(ident, config_cls))


def digest(obj: Any) -> str:
    """16 hex digits of a sha256 of ``obj``'s canonical JSON."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _normalised(cfg: dict[str, Any], cls: type | None, training_only: bool) -> dict[str, Any]:
    if cls is None:
        return dict(cfg)
    known = cls.__dataclass_fields__
    skip = {PLACEMENT, BUDGET} if training_only else {PLACEMENT}
    out = {k: v for k, v in cfg.items() if k not in known}  # a field since removed: as stored
    for k in known:
        if role(cls, k) not in skip:
            out[k] = cfg[k] if k in cfg else stored_default(cls, k)
    return out


def differences(
    stored: dict[str, Any],
    current: dict[str, Any],
    config_cls: type | None,
    *,
    training_only: bool = False,
) -> list[str]:
    """Where ``stored`` and ``current`` are not the same run: section names (``data.name``,
    ``seed``) and model-config fields (``model.dim``); empty when they are the same run.

    ``config_cls`` is the current model's config class (None: compare the stored form as is).
    A ``current`` fingerprint of None (the data is not on this machine) matches any stored one.
    """
    config_cls = _flat_class(config_cls)
    if current.get("fingerprint", "") is None:
        stored = {**stored, "fingerprint": None}
    a, b = (
        (training_part(stored, config_cls), training_part(current, config_cls))
        if training_only
        else (stored, current)
    )
    out = [
        name
        for k in sorted(set(a) | set(b))
        if k != "model_config"
        for name in _diff(a.get(k), b.get(k), k)
    ]
    old = _normalised(_json(a.get("model_config", {})), config_cls, training_only)
    new = _normalised(_json(b.get("model_config", {})), config_cls, training_only)
    inert = (inert_fields(config_cls, old) & inert_fields(config_cls, new)) if config_cls else set()
    out += sorted(
        f"model.{k}" for k in set(old) | set(new) if k not in inert and old.get(k) != new.get(k)
    )
    return out


def same_run(
    stored: dict[str, Any],
    current: dict[str, Any],
    config_cls: type | None,
    *,
    training_only: bool = False,
) -> bool:
    """Whether ``stored`` (read from disk) and ``current`` identify the same run (module doc)."""
    if stored.get("model") != current.get("model"):  # the common miss of a scan, decided early
        return False
    return not differences(stored, current, config_cls, training_only=training_only)


def _diff(old: Any, new: Any, prefix: str) -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        return [
            name
            for key in sorted(set(old) | set(new))
            for name in _diff(old.get(key), new.get(key), f"{prefix}.{key}")
        ]
    return [] if _json(old) == _json(new) else [prefix]
