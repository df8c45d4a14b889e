"""Reproduction tables: ``configs/reproduce/NAME.toml`` -> a :class:`Table` of concrete runs.

A table file holds a title, a description, the metric columns of its report, ``[defaults]``
(experiment sections shared by every run, plus ``seeds``) and ``[[runs]]``: a model on a
dataset with its own sections, seeds and the published numbers to compare with::

    title = "LRURec paper, Table 3"
    metrics = ["NDCG@10", "Recall@10"]
    [defaults]
    seeds = [0]
    [defaults.train]
    num_threads = 1
    [[runs]]
    id = "sasrec-ml1m"
    label = "SASRec"
    dataset = "ml-1m-sasrec"
    [runs.model]          # the model and its parameters (or just: model = "pop")
    name = "sasrec"
    max_len = 200
    [[runs.published]]
    metric = "NDCG@10"
    value = 0.1902
    source = "LRURec paper, Table 3"

Each (run, seed) becomes one :class:`RunSpec` whose :class:`~seqrec.config.Experiment` is
validated up front, so a typo fails before anything trains.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from seqrec.config import Experiment, experiment_from_tree, read_config
from seqrec.errors import ConfigError, did_you_mean

SECTIONS = ("data", "split", "model", "train", "eval")
RUN_KEYS = ("id", "label", "dataset", "model", "seeds", "published", "note", *SECTIONS)
TABLE_KEYS = (
    "title",
    "description",
    "metrics",
    "defaults",
    "runs",
    "breakdown_metric",
    "pairs",
    "findings",
)
DEFAULT_METRICS = ("NDCG@10", "Recall@10", "NDCG@20", "Recall@20")


@dataclass(frozen=True)
class Published:
    """A published number a run is compared with."""

    metric: str
    value: float
    source: str


@dataclass(frozen=True)
class RunSpec:
    """One concrete run of a table: a row (``run_id``) at one seed."""

    run_id: str
    label: str
    seed: int
    experiment: Experiment
    published: tuple[Published, ...] = ()
    note: str = ""

    @property
    def dataset(self) -> str:
        return self.experiment.data.name

    @property
    def model(self) -> str:
        """Registry name of the model."""
        return self.experiment.model


@dataclass(frozen=True)
class Table:
    """A reproduction table: its runs and how to report them."""

    name: str
    title: str
    description: str
    metrics: tuple[str, ...]
    runs: tuple[RunSpec, ...]
    path: Path
    breakdown_metric: str = "NDCG@10"
    row_ids: tuple[str, ...] = field(default=())
    pairs: tuple[tuple[str, str, str], ...] = field(default=())
    """(label, run a, run b): rows compared side by side with the gap of b against a."""
    findings: str = ""
    """What the runs showed: where a row misses its published number, what was tried and the
    likely cause (Markdown paragraphs, rendered under the comparison with the papers)."""

    def select(self, models=None, datasets=None, seeds=None, run_ids=None) -> tuple[RunSpec, ...]:
        """The runs matching every given filter (None = no filter)."""
        out = []
        for r in self.runs:
            if models and r.model not in models:
                continue
            if datasets and r.dataset not in datasets:
                continue
            if seeds is not None and r.seed not in seeds:
                continue
            if run_ids and r.run_id not in run_ids:
                continue
            out.append(r)
        return tuple(out)


def table_path(name: str | Path, root: str | Path = ".") -> Path:
    """``NAME`` -> ``<root>/configs/reproduce/NAME.toml``; a path to a file is used as is."""
    p = Path(name)
    if p.suffix in (".toml", ".yaml", ".yml") or p.exists():
        return p
    path = Path(root) / "configs" / "reproduce" / f"{name}.toml"
    if not path.exists():
        if not path.parent.is_dir():
            raise ConfigError(
                f"no reproduction table {name!r}: {path.parent} does not exist here. "
                f"{_where_tables_are()}"
            )
        known = sorted(q.stem for q in path.parent.glob("*.toml"))
        raise ConfigError(
            f"no reproduction table {name!r}{did_you_mean(name, known)} ({path} "
            f"does not exist); known: {', '.join(known) or 'none'} (seqrec reproduce "
            "alone lists them with their titles)"
        )
    return path


def table_titles(root: str | Path = ".") -> list[tuple[str, str]]:
    """``(name, title)`` of every table in ``<root>/configs/reproduce`` (ConfigError outside a
    checkout, with where the tables are)."""
    folder = Path(root) / "configs" / "reproduce"
    if not folder.is_dir():
        raise ConfigError(
            f"no reproduction tables here: {folder} does not exist. {_where_tables_are()}"
        )
    return [
        (path.stem, str(read_config(path).get("title", "")))
        for path in sorted(folder.glob("*.toml"))
    ]


def _where_tables_are() -> str:
    """A hint for a run outside the checkout: the tables, reports and records are paths relative
    to the working directory, so the harness is run from the checkout's root."""
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "configs" / "reproduce").is_dir():
        return (
            f"The tables are in {checkout / 'configs' / 'reproduce'}: run `seqrec reproduce` from "
            f"{checkout} (its reports and records are written under the working directory), "
            "or pass a table file's path."
        )
    return (
        "The tables ship with a seqrec checkout (configs/reproduce/), not with the installed "
        "package: run `seqrec reproduce` from a checkout's root, or pass a table file's path."
    )


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _seeds(value: Any, where: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(s, int) for s in value):
        raise ConfigError(f"{where}: seeds must be a non-empty list of integers, got {value!r}")
    return tuple(value)


def _published(items: Any, where: str) -> tuple[Published, ...]:
    if not isinstance(items, list):
        raise ConfigError(f"{where}: published must be a list of tables, got {items!r}")
    out = []
    for p in items:
        if (
            not isinstance(p, dict)
            or set(p) - {"metric", "value", "source"}
            or not {"metric", "value"} <= set(p)
        ):
            raise ConfigError(
                f"{where}: each published entry needs metric, value (and source), got {p!r}"
            )
        if not isinstance(p["value"], (int, float)):
            raise ConfigError(f"{where}: published value must be a number, got {p['value']!r}")
        out.append(Published(str(p["metric"]), float(p["value"]), str(p.get("source", ""))))
    return tuple(out)


def _experiment(sections: dict[str, Any], seed: int) -> Experiment:
    """The run's experiment; a peer row (``peer:<library>``, see :mod:`.peers`) validates its
    model/train keys as a ``PeerConfig`` and the other sections as any run's."""
    from dataclasses import replace

    from seqrec_lab.peers import is_peer, peer_config

    name = str(sections["model"].get("name", ""))
    if not is_peer(name):
        return experiment_from_tree({**copy.deepcopy(sections), "seed": seed})
    params = {k: v for sec in ("model", "train") for k, v in sections[sec].items() if k != "name"}
    peer_config(name, params, seed)
    exp = experiment_from_tree(
        {**copy.deepcopy(sections), "model": {"name": "pop"}, "train": {}, "seed": seed}
    )
    return replace(exp, model=name, model_params=params)


def _model_defaults(model: str, values: dict[str, Any], where: str) -> dict[str, Any]:
    """The keys of ``values`` that ``model``'s config has; a key no registered model has is a
    typo (``ConfigError``)."""

    from seqrec.registry import model_names, settings_fields
    from seqrec_lab.peers import FIELDS, is_peer

    if not values:
        return {}
    known = {key for name in model_names() for key in settings_fields(name)} | set(FIELDS)
    if is_peer(model):
        return {k: v for k, v in values.items() if k in FIELDS}
    typos = sorted(set(values) - known)
    if typos:
        raise ConfigError(f"{where}: no model has key(s) {', '.join(typos)}")
    try:
        own = settings_fields(model)
    except ConfigError:
        return dict(values)  # the unknown model is reported when the run's experiment is built
    return {k: v for k, v in values.items() if k in own}


def load_table(name: str | Path, root: str | Path = ".") -> Table:
    """Read and validate a table; every run's experiment is built (``ConfigError`` on a typo)."""
    path = table_path(name, root)
    tree = read_config(path)
    unknown = sorted(set(tree) - set(TABLE_KEYS))
    if unknown:
        raise ConfigError(
            f"{path}: unknown key(s) {', '.join(unknown)}; valid: {', '.join(TABLE_KEYS)}"
        )
    defaults = dict(tree.get("defaults", {}))
    default_seeds = _seeds(defaults.pop("seeds", [0]), f"{path} [defaults]")
    bad = sorted(set(defaults) - set(SECTIONS))
    if bad:
        raise ConfigError(
            f"{path} [defaults]: unknown key(s) {', '.join(bad)}; valid: seeds, {', '.join(SECTIONS)}"
        )
    runs_tree = tree.get("runs", [])
    if not runs_tree:
        raise ConfigError(f"{path}: a table needs at least one [[runs]] entry")
    runs: list[RunSpec] = []
    ids: list[str] = []
    for i, run in enumerate(runs_tree):
        where = f"{path} [[runs]] #{i + 1}"
        unknown = sorted(set(run) - set(RUN_KEYS))
        if unknown:
            raise ConfigError(
                f"{where}: unknown key(s) {', '.join(unknown)}; valid: {', '.join(RUN_KEYS)}"
            )
        run = dict(run)
        if isinstance(run.get("model"), str):  # shorthand: model = "pop" (no parameters)
            run["model"] = {"name": run["model"]}
        for need in ("id", "dataset", "model"):
            if need not in run:
                raise ConfigError(f"{where}: missing {need!r}")
        if "name" not in run["model"]:
            raise ConfigError(f'{where}: [runs.model] needs name = "<model>" (seqrec models)')
        run_id = str(run["id"])
        if run_id in ids:
            raise ConfigError(f"{where}: duplicate run id {run_id!r}")
        ids.append(run_id)
        base = dict(defaults)
        own = set(run["model"]) | set(run.get("train", {}))
        for sec in ("model", "train"):  # shared training keys apply to the models that have them
            kept = _model_defaults(
                run["model"]["name"], defaults.get(sec, {}), f"{path} [defaults.{sec}]"
            )
            # model and train are one parameter set: a row's own key beats a default in either
            # section (a row's [runs.model] key must not lose to [defaults.train])
            base[sec] = {k: v for k, v in kept.items() if k not in own or k in run.get(sec, {})}
        sections = {s: _merge(base.get(s, {}), run.get(s, {})) for s in SECTIONS}
        sections["data"]["name"] = run["dataset"]
        published = _published(run.get("published", []), where)
        for seed in _seeds(run.get("seeds", list(default_seeds)), where):
            try:
                exp = _experiment(sections, seed)
            except ConfigError as exc:
                raise ConfigError(f"{where} ({run_id}): {exc}") from None
            runs.append(
                RunSpec(
                    run_id,
                    str(run.get("label", run_id)),
                    seed,
                    exp,
                    published,
                    str(run.get("note", "")),
                )
            )
    pairs = []
    for pr in tree.get("pairs", []):
        if not isinstance(pr, dict) or set(pr) - {"label", "a", "b"} or not {"a", "b"} <= set(pr):
            raise ConfigError(
                f"{path}: each pairs entry needs a, b (run ids) and label, got {pr!r}"
            )
        for side in ("a", "b"):
            if pr[side] not in ids:
                raise ConfigError(
                    f"{path}: pairs names unknown run {pr[side]!r}; runs: {', '.join(ids)}"
                )
        pairs.append((str(pr.get("label", f"{pr['a']} vs {pr['b']}")), pr["a"], pr["b"]))
    metrics = tuple(tree.get("metrics", DEFAULT_METRICS))
    return Table(
        name=path.stem,
        title=str(tree.get("title", path.stem)),
        description=str(tree.get("description", "")).strip(),
        metrics=metrics,
        runs=tuple(runs),
        path=path,
        breakdown_metric=str(tree.get("breakdown_metric", "NDCG@10")),
        row_ids=tuple(ids),
        pairs=tuple(pairs),
        findings=str(tree.get("findings", "")).strip(),
    )
