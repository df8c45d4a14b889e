"""Experiment configuration: TOML or YAML -> frozen dataclasses, with ``--set a.b=c`` overrides.

Sections: ``data``, ``split``, ``model``, ``train``, ``eval`` (plus top-level ``seed`` and
``output``). ``model.name`` picks the model from the registry; every other key of ``model`` and
``train`` must be a field of that model's config dataclass. An unknown key anywhere is a
``ConfigError`` listing the valid keys.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import tomllib

from seqrec.data.preprocess import PreprocessConfig
from seqrec.errors import ConfigError


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

    def preprocess_config(self) -> PreprocessConfig:
        return PreprocessConfig(self.min_rating, self.dedup, self.filter, self.min_item, self.min_user)

    def __post_init__(self) -> None:
        self.preprocess_config()  # validates filter and thresholds


@dataclass(frozen=True)
class SplitSection:
    """Evaluation protocol."""

    protocol: str = "leave-last-out"
    """'leave-last-out' or 'temporal'."""
    valid: str = "3W"
    """Temporal: validation window (duration like 3W/4M/2D, or an interaction count)."""
    test: str = "3W"
    """Temporal: test window."""
    refit: bool = False
    """Refit on train+valid before testing (the temporal protocol's usual choice)."""

    def __post_init__(self) -> None:
        if self.protocol not in ("leave-last-out", "temporal"):
            raise ConfigError(
                f"split.protocol must be 'leave-last-out' or 'temporal', got {self.protocol!r}"
            )
        from seqrec.data.splits import parse_window

        parse_window(self.valid)
        parse_window(self.test)


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
            raise ConfigError(f"eval.coverage must be 'catalogue' or 'fit_items', got {self.coverage!r}")
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

    def model_config(self) -> Any:
        """The model's frozen config dataclass built from ``model`` + ``train`` keys."""
        from seqrec.registry import get_model

        config_cls, _ = get_model(self.model)
        params = dict(self.model_params)
        if "seed" in {f.name for f in fields(config_cls)}:
            params.setdefault("seed", self.seed)  # the experiment seed seeds the model too
        return build_dataclass(config_cls, params, f"model '{self.model}'")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        return json.loads(json.dumps(out, default=str))


def build_dataclass(cls: type, values: dict[str, Any], where: str) -> Any:
    """``cls(**values)`` with unknown keys reported as a ``ConfigError`` listing valid ones."""
    valid = [f.name for f in fields(cls)]
    unknown = sorted(set(values) - set(valid))
    if unknown:
        raise ConfigError(
            f"unknown key(s) {', '.join(unknown)} in {where}; valid keys: {', '.join(valid)}"
        )
    clean = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
    try:
        return cls(**clean)
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"bad value in {where}: {exc}") from None


def _read(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise ConfigError(f"config file {path} does not exist")
    text = path.read_text()
    try:
        if path.suffix in (".yaml", ".yml"):
            import yaml

            loaded = yaml.safe_load(text) or {}
        elif path.suffix == ".toml":
            loaded = tomllib.loads(text)
        else:
            raise ConfigError(f"config must be .toml, .yaml or .yml, got {path.name}")
    except (tomllib.TOMLDecodeError, ValueError) as exc:
        raise ConfigError(f"cannot parse {path}: {exc}") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path} must hold a mapping of sections")
    return loaded


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
    node = tree
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"--set {key}: {part} is not a section")
    node[parts[-1]] = parse_value(value.strip())


SECTIONS = ("data", "split", "model", "train", "eval", "seed", "output")


def read_config(path: str | Path) -> dict[str, Any]:
    """The raw section tree of a TOML / YAML config file (``ConfigError`` if unreadable)."""
    return _read(Path(path))


def load_experiment(path: str | Path | None = None, overrides: list[str] | None = None) -> Experiment:
    """Read a config file (optional), apply ``--set`` overrides, validate everything."""
    tree: dict[str, Any] = _read(Path(path)) if path else {}
    for assignment in overrides or []:
        apply_override(tree, assignment)
    return experiment_from_tree(tree)


def experiment_from_tree(tree: dict[str, Any]) -> Experiment:
    """Validate a section tree (``{"data": {...}, "model": {"name": ...}, ...}``)."""
    unknown = sorted(set(tree) - set(SECTIONS))
    if unknown:
        raise ConfigError(f"unknown section(s) {', '.join(unknown)}; valid: {', '.join(SECTIONS)}")
    model_tree = dict(tree.get("model", {}))
    name = model_tree.pop("name", "pop")
    params = {**model_tree, **tree.get("train", {})}
    exp = Experiment(
        data=build_dataclass(DataSection, tree.get("data", {}), "section [data]"),
        split=build_dataclass(SplitSection, tree.get("split", {}), "section [split]"),
        model=str(name),
        model_params=params,
        eval=build_dataclass(EvalSection, tree.get("eval", {}), "section [eval]"),
        seed=int(tree.get("seed", 0)),
        output=str(tree.get("output", "runs")),
    )
    exp.model_config()  # fail early on an unknown model or key
    return exp
