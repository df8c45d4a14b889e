"""The library in a few lines: :func:`train` and :func:`load`, what ``seqrec train`` and a saved
artifact are from the command line.

.. code-block:: python

    import seqrec

    run = seqrec.train("shop.csv", "sasrec", epochs=20)   # a file, a dataset name, a DataFrame or a list of rows
    run.metrics["NDCG@10"]                               # test metrics (run.valid_metrics too)
    run.recommend(user="c42", k=10).items                # raw ids in, raw ids out
    run.recommend(history=["sku1", "sku7"], k=5)
    run.save("models/shop-sasrec")                       # seqrec serve / recommend / load take it
    model = seqrec.load("models/shop-sasrec")            # the same kind of object as run

Keyword arguments of :func:`train` are the model's settings (``seqrec config sasrec`` lists them
with their defaults: ``dim``, ``epochs``, ``lr``, ...); the other sections of an experiment go in
as dicts: ``data_options`` (``filter``, ``columns``, ``time_unit``, ...), ``split_options``
(``protocol``, ...), ``eval_options`` (``ks``, ``seen_filter``). Everything is validated as a
config file is: an unknown key is an error listing the valid ones. With ``out`` the run is a run
directory like ``seqrec train --out``'s (checkpoint, resumable, result files, the artifact in
``out/model``); without it nothing is written.
"""

from __future__ import annotations

import inspect
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seqrec.config import Experiment, experiment_from_tree
from seqrec.errors import ConfigError
from seqrec.models.base import Recommendation, Recommender

IN_MEMORY_NAME = "frame"


@dataclass
class TrainedRun:
    """A fitted model with the experiment and the result record that describe it: what
    :func:`train` returns and what :func:`load` reads back, so that the same calls work on
    both. ``experiment`` is None and ``record`` empty for an artifact saved outside a run
    directory. Attributes of the model (``score``, ``top_k``, ``vocab``, ``n_items``,
    ``reads_time``...) are reachable on the run too."""

    model: Recommender
    experiment: Experiment | None
    record: dict[str, Any]
    out: Path | None = None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("model", "experiment", "record", "out"):
            raise AttributeError(name)
        return getattr(self.model, name)

    @property
    def metrics(self) -> dict[str, float]:
        """Test metrics (full ranking, the configured seen filter); empty when unknown."""
        return dict(self.record.get("metrics", {}).get("test") or {})

    @property
    def valid_metrics(self) -> dict[str, float]:
        return dict(self.record.get("metrics", {}).get("valid") or {})

    def recommend(
        self,
        user: Any = None,
        history: list[Any] | None = None,
        k: int = 10,
        exclude_seen: bool = True,
        allow: list[Any] | None = None,
        deny: list[Any] | None = None,
        times: list[Any] | None = None,
        unknown_users: str = "error",
    ) -> Recommendation:
        """Top-``k`` raw item ids for a stored ``user`` (their training history) or for a
        ``history`` of raw item ids, oldest first (unknown ids are skipped and counted), with its
        ``times`` (one per item) for a model that reads time (``model.reads_time``). A ``user``
        the artifact does not store is an error, or with ``unknown_users="empty"`` gets the
        popularity ranking (``fallback``), as everywhere (docs/serving.md)."""
        from seqrec.serving import batch

        if (user is None) == (history is None):
            raise ConfigError("give one of user=ID or history=[item ids]")
        if times is not None and history is None:
            raise ConfigError("times go with a history (a stored user's times are stored)")
        request = (
            batch.Request(user)
            if user is not None
            else batch.Request("-", list(history), None if times is None else list(times))
        )
        (rec,) = batch.recommend_requests(
            self.model, [request], k, exclude_seen, allow, deny, unknown_users=unknown_users
        )
        return rec

    def session(
        self,
        user: Any = None,
        history: list[Any] | None = None,
        times: list[Any] | None = None,
        store: Any = None,
        unknown_users: str = "error",
    ) -> Any:
        """A live stream for ``user`` (their stored history) or a new one: ``.append(item,
        time=None)`` then ``.recommend(k, exclude_seen, allow, deny)``, answered through the
        model's incremental encoder with the filters and unknown-id rule of :meth:`recommend`;
        ``store`` (a file path or ``redis://`` URL) keeps the events, else they stay in memory
        (:func:`seqrec.live.session.session`)."""
        from seqrec.live.session import session

        return session(self.model, user, history, times, store, unknown_users)

    def __repr__(self) -> str:
        # the default dataclass repr prints the whole record (hundreds of numbers) in a notebook
        rec = self.record
        test = rec.get("metrics", {}).get("test", {})
        shown = ", ".join(f"{k} {test[k]:.4f}" for k in ("NDCG@10", "HR@10") if k in test)
        trained = (
            f"; {rec['epochs']} epoch(s), stopped by {rec.get('stopped')}"
            if rec.get("epochs")
            else ""
        )
        where = f"; out={str(self.out)!r}" if self.out is not None else ""
        data = Path(str(rec.get("dataset", "?"))).name.split(".")[0]  # a file: its name
        model = rec.get("model") or self.model.name
        return (
            f"TrainedRun({model} on {data}, "
            f"{rec.get('protocol', '?')}: test {shown or 'no metrics'}{trained}{where})"
        )

    def save(self, path: str | Path, overwrite: bool = False) -> Path:
        """Write the artifact (``seqrec recommend / serve / export`` and :func:`load` read it);
        another model's artifact at ``path`` is replaced only with ``overwrite``."""
        return self.model.save(path, overwrite)


def train(
    data: Any,
    model: str = "sasrec",
    *,
    data_options: dict[str, Any] | None = None,
    split_options: dict[str, Any] | None = None,
    eval_options: dict[str, Any] | None = None,
    seed: int = 0,
    out: str | Path | None = None,
    fresh: bool = False,
    progress: bool = True,
    **settings: Any,
) -> TrainedRun:
    """Fit ``model`` on ``data`` and evaluate it on validation and test (see the module doc).

    Args:
        data: a dataset name (``seqrec data list``), a file path, or a Polars / pandas
            DataFrame or dict of columns (read like a file: ``data_options["columns"]`` maps
            its columns when their names are not recognised).
        model: a registered model name (``seqrec models``).
        out: a run directory (checkpoints, resume, result files, the artifact); None: in memory.
        fresh: with ``out``, start over instead of resuming an interrupted run there.
        progress: print one line per epoch (stderr).
        **settings: the model's settings (model and training keys, one flat set).
    """
    from seqrec.cli import runs
    from seqrec.data.sources import load as load_data
    from seqrec.evaluation.results import write_result
    from seqrec.experiment import prepare_data, run_experiment
    from seqrec.serving.histories import UserHistories

    in_memory = not isinstance(data, (str, Path))
    data_tree = {**(data_options or {}), "name": IN_MEMORY_NAME if in_memory else str(data)}
    tree = {
        "data": data_tree,
        "split": dict(split_options or {}),
        "eval": dict(eval_options or {}),
        "model": {"name": model, **settings},
        "seed": seed,
    }
    exp = experiment_from_tree(tree)
    interactions = None
    if in_memory:
        from seqrec.data.sources.tables import read_frame

        options = exp.data.read_options()
        bad = sorted(set(options) - set(inspect.signature(read_frame).parameters))
        if bad:
            raise ConfigError(f"data_options {bad} apply to files, not to an in-memory table")
        interactions = load_data(data, name=IN_MEMORY_NAME, **options)
    prepared = prepare_data(exp, interactions=interactions)
    fit_options: dict[str, Any] = {
        "progress": progress,
        "on_epoch": runs.EpochPrinter(exp.model) if progress else None,
    }
    lock = None
    if out is not None:
        out = Path(out)
        resumable, lock = runs.prepare_run_dir(out, exp, fresh)
        try:  # a log that changed since the run started is a new run (fresh=True), not a resume
            runs.check_same_data(
                out,
                str(exp.data.name),
                prepared.prepared.fingerprint(),
                prepared.prepared.n_users,
                prepared.prepared.n_items,
                resumable,
            )
        except ConfigError:
            lock.close()
            raise
        if resumable and progress:
            print(
                f"resuming the run in {out} (fresh=True starts over)", file=sys.stderr, flush=True
            )
        fit_options |= {
            "checkpoint_dir": out / runs.CHECKPOINT,
            "checkpoint_every": runs.CHECKPOINT_EVERY,
        }
    try:
        fitted, record = run_experiment(
            exp,
            data=prepared,
            save_dir=None if out is None else out / "model",
            fit_options=fit_options,
        )
    finally:
        if lock is not None:
            lock.close()
    if getattr(fitted, "user_histories", None) is None:  # recommend(user=...) in memory too
        fitted.user_histories = UserHistories.from_prepared(prepared.prepared)
    if out is not None:
        write_result(record, out, "result")
    return TrainedRun(fitted, exp, record, out)


def load(path: str | Path) -> TrainedRun:
    """A saved model, as :func:`train` returns one: an artifact directory or the run directory
    holding it (whose ``result.json`` gives ``metrics``). ``.model`` is the bare recommender."""
    import json

    from seqrec.serving.artifact import artifact_dir

    art = artifact_dir(path)
    model = Recommender.load(art)
    run_dir = art.parent if (art.parent / "result.json").is_file() else None
    record: dict[str, Any] = {}
    if run_dir is not None:
        try:
            record = json.loads((run_dir / "result.json").read_text())
        except (OSError, ValueError):
            record = {}
    return TrainedRun(model, None, record if isinstance(record, dict) else {}, run_dir)
