"""An experiment config written back as TOML that ``load_experiment`` reads again.

``seqrec config MODEL`` prints :func:`default_config_toml`: every section with every field at
its default, each preceded by the field's docstring as a comment, so that a user can copy it,
edit a value and run ``seqrec train -c file.toml``.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import math
import textwrap
from typing import Any

from seqrec.config import DataSection, EvalSection, SplitSection
from seqrec.config_fields import CONFIG_SECTIONS, section


def field_docs(cls: type) -> dict[str, str]:
    """Each dataclass field's docstring (the string literal under it), from the source of
    ``cls`` and its bases (of each part of a flat settings class); fields without one are
    left out."""
    docs: dict[str, str] = {}
    parts = getattr(cls, "part_classes", None)  # flat settings: the docs of its parts
    if parts is not None:
        for part in parts:
            docs |= field_docs(part)
        return docs
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):  # pragma: no cover - no source available
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for node, nxt in zip(body, body[1:], strict=False):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)
            ):
                docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def toml_value(value: Any) -> str | None:
    """A TOML literal for ``value``; None for None (TOML has no null: the key is commented)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # JSON string escapes are valid TOML basic-string escapes
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) or '""' for v in value) + "]"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def _section(name: str, values: dict[str, Any], docs: dict[str, str]) -> list[str]:
    lines = [f"[{name}]"]
    for key, value in values.items():
        if key in docs:
            lines.append(f"# {docs[key]}")
        literal = toml_value(value)
        lines.append(f"{key} = {literal}" if literal is not None else f"# {key} = (none)")
    return lines + [""]


def _defaults(cls: type) -> dict[str, Any]:
    return {f.name: getattr(cls(), f.name) for f in dataclasses.fields(cls)}


def default_config_toml(model: str) -> str:
    """The whole default experiment for ``model`` as TOML (loadable by ``load_experiment``)."""
    from seqrec.registry import get_model, settings_class

    config_cls = settings_class(model)
    model_config_cls, model_cls = get_model(model)
    params = _defaults(config_cls)
    params.pop("seed", None)  # the top-level seed seeds the model too (one seed, not two)
    parts: dict[str, dict[str, Any]] = {"model": {"name": model}, "train": {}, "run": {}}
    for key, value in params.items():
        parts[section(config_cls, key)][key] = value
    docs = field_docs(config_cls) | {"name": "Model name (seqrec models)."}
    lines = [
        f"# seqrec experiment: the default config of {model}.",
        "# Run it with: seqrec train -c THIS_FILE (any value can be overridden with --set).",
        _inputs_line(model_cls(model_config_cls())),
        "# Seed of the model (initialization, data order, negatives); recorded with the results.",
        "seed = 0",
        'output = "runs"',
        "",
    ]
    lines += _section("data", _defaults(DataSection), field_docs(DataSection))
    lines += _section("split", _defaults(SplitSection), field_docs(SplitSection))
    for name in CONFIG_SECTIONS:  # model, train, run: as each field declares
        if name == "model" or parts[name]:
            lines += _section(name, parts[name], docs)
    lines += _section("eval", _defaults(EvalSection), field_docs(EvalSection))
    return "\n".join(lines).rstrip() + "\n"


def _inputs_line(model: Any) -> str:
    """What the model reads at inference with these settings (``Recommender.reads_time``)."""
    if model._config_reads_time():
        return (
            "# Reads: each history's items and their timestamps (trained on data with real "
            "times, it refuses histories without them: --times, 'times', times=)."
        )
    return "# Reads: each history's items."
