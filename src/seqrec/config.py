"""Experiment configuration: TOML or YAML -> frozen dataclasses, with ``--set a.b=c`` overrides.

Sections: ``data``, ``split``, ``model``, ``train``, ``run``, ``eval`` (plus top-level ``seed``
and ``output``). ``model.name`` picks the model from the registry; every other key of ``model``,
``train`` and ``run`` must be a field of that model's config dataclass (one flat set: each field
declares the section it is written in, and is read from any of the three). An unknown key anywhere is a
``ConfigError`` listing the valid keys.
"""

from __future__ import annotations

import json
import math
import types
import typing
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

try:  # Python 3.11+; tomli is the same parser for 3.10 (a dependency only there)
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from seqrec.config_fields import section as field_section
from seqrec.data.preprocess import PreprocessConfig
from seqrec.errors import ConfigError, did_you_mean
from seqrec.registry import canonical_model_name


@dataclass(frozen=True)
class DataSection:
    """Which dataset and how to preprocess it."""

    name: str = "ml-latest-small"
    """Dataset name (``seqrec data list``) or a path to a CSV/TSV/Parquet file."""
    root: str | None = None
    """Directory of the dataset files (default: $SEQREC_DATA_DIR or ../shared/data)."""
    min_rating: float | None = None
    """Implicit conversion: keep ratings >= this."""
    dedup: bool = False
    """Drop repeated (user, item) pairs, keeping the first."""
    filter: str = "k_core"
    """'none', 'min_count' (single pass) or 'k_core' (iterative)."""
    min_item: int = 5
    """Item threshold (min_count) or k (k_core)."""
    min_user: int = 5
    """User threshold (min_count)."""
    columns: str = ""
    """File column mapping 'user=uid,item=sku,timestamp=ts' (roles user, item, timestamp, rating; timestamp=none: file order is time order)."""
    sep: str = ""
    """Field separator of a text file ('' = from the extension; 'tab' or '\\t' for a tab, 'space' for a space)."""
    names: str = ""
    """Comma-separated column names of a file without a header line ('' = it has one)."""
    time_unit: str = "auto"
    """Numeric timestamps in 's', 'ms', 'us' or 'ns'; 'auto' = seconds, or the unit their size implies (past the year 5000 as seconds), with a note; 'iso' for text dates (every unit reads dates too)."""
    time_format: str = ""
    """strftime format of text timestamps ('' = ISO dates and datetimes)."""
    item_file: str = ""
    """Optional item-metadata file (item id, title, categories) shown in recommendations."""
    item_columns: str = ""
    """Column mapping of item_file 'item=sku,title=name,categories=tags' ('' = common names)."""

    events: str = ""
    """Keep only the rows of these kinds of event, comma-separated ('transaction,addtocart' of
    RetailRocket's event column; the column is found by its name, or named with
    data.columns=event=<name>); '' keeps every row, and an event column is then named among the
    ignored columns."""

    READ_KEYS: ClassVar[tuple[str, ...]] = (
        "columns",
        "sep",
        "names",
        "time_unit",
        "time_format",
        "item_file",
        "item_columns",
        "events",
    )

    def preprocess_config(self) -> PreprocessConfig:
        return PreprocessConfig(
            self.min_rating, self.dedup, self.filter, self.min_item, self.min_user
        )

    def identity(self) -> dict[str, Any]:
        """The section as a dict for run identities; the file-reading keys appear only when
        set, so identities recorded before those keys existed still match."""
        return {
            k: v
            for k, v in asdict(self).items()
            if k not in self.READ_KEYS or v != getattr(type(self), k)
        }

    def read_options(self) -> dict[str, Any]:
        """Options of ``seqrec.data.sources.load`` for a file (empty when all are defaults)."""
        opts: dict[str, Any] = {}
        if self.columns:
            opts["columns"] = _mapping(self.columns, "data.columns", none_ok=True)
        if self.sep:
            opts["sep"] = {"tab": "\t", "\\t": "\t", "space": " "}.get(self.sep, self.sep)
        if self.names:
            opts["names"] = [n.strip() for n in self.names.split(",")]
            opts["has_header"] = False
        if self.time_unit != "auto":
            opts["timestamp_unit"] = self.time_unit
        if self.time_format:
            opts["time_format"] = self.time_format
        if self.item_file:
            opts["item_file"] = self.item_file
            if self.item_columns:
                opts["item_columns"] = _mapping(self.item_columns, "data.item_columns")
        elif self.item_columns:
            raise ConfigError("data.item_columns needs data.item_file")
        if self.events:
            opts["events"] = [e.strip() for e in self.events.split(",") if e.strip()]
        return opts

    def __post_init__(self) -> None:
        self.preprocess_config()  # validates filter and thresholds
        if self.time_unit not in TIME_UNITS:
            raise ConfigError(
                f"data.time_unit must be one of {', '.join(TIME_UNITS)}, got {self.time_unit!r}"
            )
        self.read_options()  # validates the mappings


TIME_UNITS = ("auto", "s", "ms", "us", "ns", "iso")


def _mapping(text: str, key: str, none_ok: bool = False) -> dict[str, str | None]:
    """'user=uid,item=sku' -> {'user': 'uid', 'item': 'sku'}; 'none' -> None where allowed."""
    out: dict[str, str | None] = {}
    for part in str(text).split(","):
        role, sep, column = (x.strip() for x in part.partition("="))
        if not sep or not role or not column:
            raise ConfigError(
                f"{key} expects ROLE=COLUMN pairs separated by commas, like "
                f"'user=uid,item=sku', got {text!r}"
            )
        out[role] = None if (none_ok and column.lower() == "none") else column
    return out


@dataclass(frozen=True)
class SplitSection:
    """Evaluation protocol."""

    protocol: str = "leave-last-out"
    """'leave-last-out', 'temporal' or 'item-cold' (leave-last-out with a share of the items
    held out of training; targets that are those items are measured apart, ``test_cold``)."""
    valid: str = "3W"
    """Temporal: validation window (duration like 3W/4M/2D, or an interaction count)."""
    test: str = "3W"
    """Temporal: test window."""
    refit: bool = False
    """Refit on train+valid before testing (the temporal protocol's usual choice)."""
    cold_share: float = 0.1
    """Item-cold: the share of items held out of training (drawn with the seed)."""

    def __post_init__(self) -> None:
        if self.protocol not in ("leave-last-out", "temporal", "item-cold"):
            raise ConfigError(
                "split.protocol must be 'leave-last-out', 'temporal' or 'item-cold', "
                f"got {self.protocol!r}"
            )
        if not 0.0 < self.cold_share < 1.0:
            raise ConfigError(f"split.cold_share must be in (0, 1), got {self.cold_share!r}")
        from seqrec.data.splits import parse_window

        parse_window(self.valid)
        parse_window(self.test)

    def identity(self) -> dict[str, Any]:
        """The section as a dict for run identities; ``cold_share`` only where the protocol
        reads it, so identities recorded before it existed still match."""
        out = asdict(self)
        if self.protocol != "item-cold":
            out.pop("cold_share")
        return out


@dataclass(frozen=True)
class EvalSection:
    """How models are evaluated."""

    ks: tuple[int, ...] = (5, 10, 20)
    """Cut-offs of HR/Recall, NDCG and Coverage."""
    seen_filter: str = "history"
    """'history', 'window' or 'none'."""
    average: str = "user"
    """'user' or 'interaction' (the temporal protocol uses 'interaction')."""
    chunk_size: int = 1024
    """Targets scored at once (bounds memory)."""
    coverage: str = "catalogue"
    """Denominator of COV@k: 'catalogue' (all items) or 'fit_items' (the items of the data the
    model was fitted on, as the SATF code)."""

    def __post_init__(self) -> None:
        if not self.ks or any(int(k) < 1 for k in self.ks):
            raise ConfigError(f"eval.ks must be positive integers, got {self.ks!r}")
        object.__setattr__(self, "ks", tuple(int(k) for k in self.ks))
        if self.seen_filter not in ("history", "window", "none"):
            raise ConfigError(
                f"eval.seen_filter must be 'history', 'window' or 'none', got {self.seen_filter!r}"
            )
        if self.average not in ("user", "interaction"):
            raise ConfigError(f"eval.average must be 'user' or 'interaction', got {self.average!r}")
        if self.coverage not in ("catalogue", "fit_items"):
            raise ConfigError(
                f"eval.coverage must be 'catalogue' or 'fit_items', got {self.coverage!r}"
            )
        if self.chunk_size < 1:
            raise ConfigError(f"eval.chunk_size must be >= 1, got {self.chunk_size}")


@dataclass(frozen=True)
class Experiment:
    """A whole experiment: data -> split -> model -> evaluation."""

    data: DataSection = field(default_factory=DataSection)
    split: SplitSection = field(default_factory=SplitSection)
    model: str = "pop"
    model_params: dict[str, Any] = field(default_factory=dict)
    eval: EvalSection = field(default_factory=EvalSection)
    seed: int = 0
    output: str = "runs"
    param_names: dict[str, str] = field(default_factory=dict, compare=False, repr=False)
    """How each key of ``model_params`` is shown in messages (``train.epochs``)."""

    def model_config(self) -> Any:
        """The model's settings built from the ``model``, ``train`` and ``run`` keys: one flat
        frozen dataclass (:func:`seqrec.registry.settings_class`); a neural model's ``.parts``
        are its model config, ``TrainConfig`` and ``RunConfig``, and the model class accepts
        it as it is."""
        from seqrec.registry import settings_class

        config_cls = settings_class(self.model)
        params = dict(self.model_params)
        if "seed" in {f.name for f in fields(config_cls)}:
            params.setdefault("seed", self.seed)  # the experiment seed seeds the model too
        return build_dataclass(config_cls, params, f"model '{self.model}'", self.param_names)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("param_names", None)
        return json.loads(json.dumps(out, default=str))


# The names other libraries give our fields (RecBole's SASRec config, RecTools' SASRecModel,
# the SASRec / BERT4Rec reference code): a newcomer's key gets ours in the error.
OTHER_NAMES: dict[str, tuple[str, str]] = {
    "hidden_size": ("dim", "RecBole"),
    "embedding_size": ("dim", "RecBole"),
    "n_factors": ("dim", "RecTools"),
    "hidden_units": ("dim", "the SASRec code"),
    "n_layers": ("n_blocks", "RecBole"),
    "num_blocks": ("n_blocks", "the SASRec code"),
    "num_layers": ("n_blocks", "PyTorch"),
    "num_heads": ("n_heads", "the SASRec code"),
    "inner_size": ("ffn_dim", "RecBole"),
    "hidden_dropout_prob": ("dropout", "RecBole"),
    "dropout_rate": ("dropout", "the SASRec code"),
    "attn_dropout_prob": ("attn_dropout", "RecBole"),
    "MAX_ITEM_LIST_LENGTH": ("max_len", "RecBole"),
    "session_max_len": ("max_len", "RecTools"),
    "maxlen": ("max_len", "the SASRec code"),
    "max_seq_len": ("max_len", "the BERT4Rec code"),
    "learning_rate": ("lr", "RecBole"),
    "train_batch_size": ("batch_size", "RecBole"),
    "stopping_step": ("patience", "RecBole"),
    "num_epochs": ("epochs", "the SASRec code"),
    "loss_type": ("loss", "RecBole"),
}


def _their_name(key: str) -> str:
    """``"RecBole's hidden_size is 'dim' here"`` for another library's name of one of our
    fields, '' for any other key."""
    if key not in OTHER_NAMES:
        return ""
    ours, library = OTHER_NAMES[key]
    owner = library + ("'" if library.endswith("s") else "'s")
    return f"{owner} {key} is {ours!r} here"


def _other_name_hint(key: str, valid: list[str]) -> str:
    return f" ({_their_name(key)})" if OTHER_NAMES.get(key, ("",))[0] in valid else ""


def build_dataclass(
    cls: type, values: dict[str, Any], where: str, names: dict[str, str] | None = None
) -> Any:
    """``cls(**values)`` with unknown keys reported as a ``ConfigError`` listing valid ones and
    every value checked against its field's declared type (:func:`coerce`).

    ``names`` maps a key to the name shown in messages (e.g. ``epochs`` -> ``train.epochs``).
    """
    if not isinstance(values, dict):
        raise ConfigError(f"{where} must be a table of key = value, got {values!r}")
    valid = [f.name for f in fields(cls)]
    unknown = sorted(set(map(str, values)) - set(valid))
    if unknown:
        hints = "".join(
            _other_name_hint(k, valid)
            or did_you_mean(k, valid + (["name"] if where.startswith("model") else []))
            for k in unknown[:1]
        )
        raise ConfigError(
            f"unknown key(s) {', '.join(unknown)} in {where}{hints}; valid keys: {', '.join(valid)}"
        )
    hints = _type_hints(cls)
    names = names or {}
    clean = {k: coerce(v, hints.get(k, Any), names.get(k, k)) for k, v in values.items()}
    try:
        return cls(**clean)
    except ConfigError:
        raise
    except (TypeError, ValueError, OverflowError, ArithmeticError) as exc:
        raise ConfigError(f"bad value in {where}: {exc}") from None


def _type_hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception:  # pragma: no cover - an annotation that cannot be resolved: no checks
        return {}


def _type_name(tp: Any) -> str:
    if tp is bool:
        return "a boolean (true or false)"
    if tp is int:
        return "an integer"
    if tp is float:
        return "a number"
    if tp is str:
        return "a string"
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin in (types.UnionType, typing.Union):
        return " or ".join("none" if a is type(None) else _type_name(a) for a in args)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return f"a list of {_plural(args[0])}"
        return f"a list of {len(args)} {_plural(args[0]) if len(set(args)) == 1 else 'values'}"
    return getattr(tp, "__name__", str(tp))


def _plural(tp: Any) -> str:
    return {bool: "booleans", int: "integers", float: "numbers", str: "strings"}.get(tp, "values")


def coerce(value: Any, tp: Any, key: str) -> Any:
    """``value`` converted to the declared type ``tp`` of config field ``key``, or a
    ``ConfigError`` naming the key, the expected type and the value received.

    Accepted: bool only for bool (no 0/1, no 'maybe'); int for int, and a float only when it is
    integral (1e3 from TOML; 1.5 is refused, never rounded); int or float for float (a string
    like '1e-3', which YAML 1.1 leaves as text, is parsed); str, int or float for str (windows
    like ``100`` are counts); a list (or one scalar, or a comma-separated string) for a tuple; None, 'none' or 'null' for an
    optional field.
    """
    if tp is Any:
        return value
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (types.UnionType, typing.Union):
        if type(None) in args and (
            value is None or (isinstance(value, str) and value.strip().lower() in ("none", "null"))
        ):
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return coerce(value, arg, key)
            except ConfigError:
                pass
        raise _bad(key, tp, value)
    if origin is typing.Literal:
        if value in args and not isinstance(value, bool):
            return value
        raise _bad(key, tp, value)
    if origin is tuple:
        if isinstance(value, str) and "," in value:  # --set eval.ks=5,10 (TOML would want [5, 10])
            value = [
                parse_value(p.strip()) for p in value.strip().strip("[]()").split(",") if p.strip()
            ]
        items = list(value) if isinstance(value, (list, tuple)) else [value]
        if isinstance(value, (dict, str)) and not (len(args) == 2 and args[1] is Ellipsis):
            raise _bad(key, tp, value)
        try:
            if len(args) == 2 and args[1] is Ellipsis:
                return tuple(coerce(v, args[0], key) for v in items)
            if args and len(items) != len(args):
                raise _bad(key, tp, value)
            return (
                tuple(coerce(v, a, key) for v, a in zip(items, args, strict=False))
                if args
                else tuple(items)
            )
        except ConfigError:
            raise _bad(key, tp, value) from None
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise _bad(key, tp, value)
    if tp is int:
        if isinstance(value, bool):
            raise _bad(key, tp, value)
        if isinstance(value, int):
            return value
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            return int(value)
        raise _bad(key, tp, value)
    if tp is float:
        if isinstance(value, bool):
            raise _bad(key, tp, value)
        if isinstance(value, (int, float)):
            try:
                return float(value)
            except OverflowError:
                raise _bad(key, tp, value) from None
        if isinstance(value, str):
            try:
                return float(value.strip())
            except ValueError:
                pass
        raise _bad(key, tp, value)
    if tp is str:
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        raise _bad(key, tp, value)
    return value  # a type without a rule (dict, a nested dataclass): the class validates it


def _bad(key: str, tp: Any, value: Any) -> ConfigError:
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return ConfigError(f"{key} must be {_type_name(tp)}, got {shown}")


def _read(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise ConfigError(f"config file {path} does not exist")
    if path.is_dir():
        raise ConfigError(f"config {path} is a directory, not a .toml/.yaml file")
    if path.suffix not in (".yaml", ".yml", ".toml"):
        raise ConfigError(f"config must be .toml, .yaml or .yml, got {path.name}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"cannot parse {path}: not UTF-8 text (byte {exc.start})") from None
    return parse_text(text, "yaml" if path.suffix in (".yaml", ".yml") else "toml", str(path))


def parse_text(text: str, fmt: str, where: str = "config") -> dict[str, Any]:
    """The mapping of sections in TOML or YAML ``text``; any syntax error is a one-line
    ``ConfigError`` naming ``where``."""
    try:
        if fmt == "yaml":
            import yaml

            loaded = yaml.safe_load(text)
            loaded = {} if loaded is None else loaded
        else:
            loaded = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError) as exc:
        hint = ""
        if isinstance(exc, tomllib.TOMLDecodeError) and "Invalid value" in str(exc):
            hint = ' (text values need quotes in TOML: name = "sasrec")'  # the usual cause
        raise ConfigError(f"cannot parse {where}: {_one_line(exc)}{hint}") from None
    except Exception as exc:  # yaml.YAMLError and the odd RecursionError of deep nesting
        if type(exc).__module__.startswith("yaml") or isinstance(exc, RecursionError):
            raise ConfigError(f"cannot parse {where}: {_one_line(exc)}") from None
        raise
    if not isinstance(loaded, dict):
        raise ConfigError(f"{where} must hold a mapping of sections, got {type(loaded).__name__}")
    return loaded


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def parse_value(text: str) -> Any:
    """A ``--set`` value: TOML literal (number, bool, string, list) or a bare string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def apply_override(tree: dict[str, Any], assignment: str) -> None:
    key, sep, value = assignment.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set expects KEY=VALUE like model.max_len=50, got {assignment!r}")
    parts = key.strip().split(".")
    if len(parts) == 1 and parts[0] not in SECTIONS:  # --set epochs=3: the section it belongs to
        parts = [section_of(parts[0]), parts[0]]
    if len(parts) == 2 and parts[0] in ("train", "run"):
        # [train] and [run] are read as one set: a key already written in the other one is
        # overridden where it is (an older file's [train] num_threads, --set run.num_threads=4)
        other = "run" if parts[0] == "train" else "train"
        if isinstance(tree.get(other), dict) and parts[1] in tree[other]:
            parts = [other, parts[1]]
    node = tree
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"--set {key}: {part} is not a section")
    node[parts[-1]] = parse_value(value.strip())


SECTIONS = ("data", "split", "model", "train", "run", "eval", "seed", "output")


def read_config(path: str | Path) -> dict[str, Any]:
    """The raw section tree of a TOML / YAML config file (``ConfigError`` if unreadable)."""
    return _read(Path(path))


def load_experiment(
    path: str | Path | None = None, overrides: list[str] | None = None
) -> Experiment:
    """Read a config file (optional), apply ``--set`` overrides, validate everything."""
    tree: dict[str, Any] = _read(Path(path)) if path else {}
    for assignment in overrides or []:
        apply_override(tree, assignment)
    return experiment_from_tree(tree)


def section_of(key: str) -> str:
    """The section a bare key belongs to: ``data``, ``split`` or ``eval`` when it is one of their
    fields, else the section a neural model's field declares (``train`` or ``run``:
    :func:`seqrec.config_fields.section`), else ``model`` (model, training and run settings
    are one flat set, validated against the model named)."""
    for section, cls in (("data", DataSection), ("split", SplitSection), ("eval", EvalSection)):
        if key in {f.name for f in fields(cls)}:
            return section
    from seqrec.models.neural_config import RunConfig, TrainConfig

    for cls in (TrainConfig, RunConfig):
        if key in {f.name for f in fields(cls)}:
            return field_section(cls, key)
    return "model"


def _section_hint(key: str) -> str:
    """Where a top-level ``key`` belongs: its section, under our name when it is another
    library's name for one of our fields (RecBole's flat YAML: ``hidden_size: 64``)."""
    ours = OTHER_NAMES.get(key, (key, ""))[0]
    theirs = f"{_their_name(key)}: " if key in OTHER_NAMES else ""
    return f" ({theirs}{ours} = ... goes in a section: [{section_of(ours)}] {ours} = ..., --set {ours}=...)"


def experiment_from_tree(tree: dict[str, Any]) -> Experiment:
    """Validate a section tree (``{"data": {...}, "model": {"name": ...}, ...}``)."""
    unknown = sorted(set(map(str, tree)) - set(SECTIONS))
    if unknown:
        hints = "".join(did_you_mean(u, SECTIONS) or _section_hint(u) for u in unknown)
        libraries = sorted({OTHER_NAMES[u][1] for u in unknown if u in OTHER_NAMES})
        lead = (
            (
                f"this looks like a config of {' / '.join(libraries)}: seqrec's has sections, "
                "each key under its own; "
            )
            if libraries
            else ""
        )
        raise ConfigError(
            f"{lead}unknown section(s) {', '.join(unknown)}{hints}; valid: {', '.join(SECTIONS)}"
        )
    for section in ("data", "split", "model", "train", "run", "eval"):
        if not isinstance(tree.get(section, {}), dict):
            raise ConfigError(
                f"[{section}] must be a section of key = value, got {tree[section]!r}"
            )
    model_tree = dict(tree.get("model", {}))
    name = canonical_model_name(coerce(model_tree.pop("name", "pop"), str, "model.name"))
    # [model], [train] and [run] are one flat parameter set (each field declares the section it
    # is written in, seqrec.config_fields.section; any of the three reads it): a key in two of
    # them would silently take one value
    parts = {
        "model": model_tree,
        "train": dict(tree.get("train", {})),
        "run": dict(tree.get("run", {})),
    }
    params: dict[str, Any] = {}
    names: dict[str, str] = {}
    for section, part in parts.items():
        for key, value in part.items():
            if key in names:
                raise ConfigError(
                    f"key(s) {key} set in both [{names[key].split('.')[0]}] and "
                    f"[{section}]; set each once"
                )
            params[key], names[key] = value, f"{section}.{key}"
    exp = Experiment(
        data=build_dataclass(
            DataSection, tree.get("data", {}), "section [data]", _prefixed("data", tree)
        ),
        split=build_dataclass(
            SplitSection, tree.get("split", {}), "section [split]", _prefixed("split", tree)
        ),
        model=name,
        model_params=params,
        eval=build_dataclass(
            EvalSection, tree.get("eval", {}), "section [eval]", _prefixed("eval", tree)
        ),
        seed=coerce(tree.get("seed", 0), int, "seed"),
        output=coerce(tree.get("output", "runs"), str, "output"),
        param_names=names,
    )
    if exp.seed < 0:
        raise ConfigError(f"seed must be an integer >= 0, got {exp.seed}")
    exp.model_config()  # fail early on an unknown model or key
    return exp


def _prefixed(section: str, tree: dict[str, Any]) -> dict[str, str]:
    return {k: f"{section}.{k}" for k in tree.get(section, {})}
