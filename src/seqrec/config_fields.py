"""How a config field is declared: its role in a run, the value older runs trained with, and
the dict form configs are stored in.

Every config is a frozen dataclass whose fields carry, beside type, default and docstring:

- a **role** (``field.metadata["role"]``): :data:`RESULT` (changes what a run computes: the
  default for a field that declares none), :data:`BUDGET` (bounds a run: a finished run given
  a larger budget continues from its checkpoint) or :data:`PLACEMENT` (where and how fast it
  runs: threads, device, how scoring is chunked; never part of a run's identity);
- optionally a **legacy** value (``field.metadata["legacy"]``): for a field added after runs
  were recorded, the value those runs trained with. A stored config without the field is read
  with it (not with today's default, which may differ);
- a **section** (``field.metadata["section"]``): where an experiment file writes it (model,
  train or run; :data:`CONFIG_SECTIONS`);
- optionally ``inert_when`` (``field.metadata["inert_when"]``): a predicate on the whole config
  dict under which the field cannot change training (the automatic batch's fields while
  ``batch_size`` is given); comparisons of runs then skip it.

A subclass that only changes a field's default (``lr: float = 3e-3``) keeps the role, legacy
value and predicate declared where the field was first declared: :func:`field_info` looks them
up along the class's MRO. :mod:`seqrec.identity` builds run identities from these declarations.

This module imports nothing of seqrec, so models, serving and the CLI can all use it.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import Any, Callable

RESULT = "result"
BUDGET = "budget"
PLACEMENT = "placement"
ROLES = (RESULT, BUDGET, PLACEMENT)

MODEL = "model"
TRAIN = "train"
RUN = "run"
CONFIG_SECTIONS = (MODEL, TRAIN, RUN)
"""The experiment-file sections a model config's fields are written in: ``[model]`` (the
model's hyperparameters), ``[train]`` (objective, optimizer, batch, windows, epochs, patience),
``[run]`` (placement and the time budget: threads, device, chunk sizes, max_train_seconds).
They are one flat set of keys: a key is read from any of them, and written in its own."""

_NONE = object()


def setting(
    default: Any = dataclasses.MISSING,
    *,
    role: str = RESULT,
    legacy: Any = _NONE,
    inert_when: Callable[[dict[str, Any]], bool] | None = None,
    section: str = MODEL,
    default_factory: Any = dataclasses.MISSING,
) -> Any:
    """A dataclass field with its role, legacy value, inertness and section declared (see the
    module)."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, got {role!r}")
    if section not in CONFIG_SECTIONS:
        raise ValueError(f"section must be one of {CONFIG_SECTIONS}, got {section!r}")
    meta: dict[str, Any] = {"role": role, "section": section}
    if legacy is not _NONE:
        meta["legacy"] = legacy
    if inert_when is not None:
        meta["inert_when"] = inert_when
    return dataclasses.field(default=default, default_factory=default_factory, metadata=meta)


@functools.lru_cache(maxsize=None)
def field_info(cls: type, name: str) -> dict[str, Any]:
    """The declared metadata of field ``name`` of config class ``cls``: the first class along
    the MRO whose own declaration of the field carries a role, else ``{"role": RESULT}``."""
    for klass in getattr(cls, "__mro__", ()):
        f = getattr(klass, "__dataclass_fields__", {}).get(name)
        if f is not None and "role" in f.metadata:
            return dict(f.metadata)
    return {"role": RESULT, "section": MODEL}  # (cached: do not modify the dict returned)


def role(cls: type, name: str) -> str:
    """:data:`RESULT`, :data:`BUDGET` or :data:`PLACEMENT` for field ``name`` of ``cls``."""
    return field_info(cls, name)["role"]


def section(cls: type, name: str) -> str:
    """The section (:data:`CONFIG_SECTIONS`) field ``name`` of ``cls`` is written in."""
    return field_info(cls, name).get("section", MODEL)


def names_with_role(cls: type, *roles: str) -> tuple[str, ...]:
    """The fields of config class ``cls`` that have one of ``roles``, in declaration order."""
    return tuple(f.name for f in dataclasses.fields(cls) if role(cls, f.name) in roles)


@functools.lru_cache(maxsize=None)
def _stored_default_text(cls: type, name: str) -> str:
    info = field_info(cls, name)
    if "legacy" in info:
        return json.dumps(info["legacy"], default=str)
    f = cls.__dataclass_fields__[name]
    if f.default is not dataclasses.MISSING:
        return json.dumps(f.default, default=str)
    if f.default_factory is not dataclasses.MISSING:
        return json.dumps(f.default_factory(), default=str)
    return "null"


def stored_default(cls: type, name: str) -> Any:
    """What a stored config without field ``name`` trained with: its legacy value where one is
    declared, else the class's default (JSON form)."""
    return json.loads(_stored_default_text(cls, name))


def inert_fields(cls: type, config: dict[str, Any]) -> set[str]:
    """Fields of ``config`` (a config dict of ``cls``) that cannot change training here."""
    return {name for name, pred in _inert_predicates(cls) if pred(config)}


@functools.lru_cache(maxsize=None)
def _inert_predicates(cls: type) -> tuple[tuple[str, Callable[[dict[str, Any]], bool]], ...]:
    return tuple(
        (f.name, field_info(cls, f.name)["inert_when"])
        for f in dataclasses.fields(cls)
        if "inert_when" in field_info(cls, f.name)
    )


def config_to_dict(config: Any) -> dict[str, Any]:
    """A config dataclass as the JSON-ready dict it is stored in (tuples become lists)."""
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return json.loads(json.dumps(dataclasses.asdict(config), default=str))
    raise TypeError(f"config must be a dataclass, got {type(config).__name__}")
