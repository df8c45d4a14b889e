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
import lzma
import time
from pathlib import Path
from typing import Any

import numpy as np

from seqrec import stop
from seqrec.atomic import atomic_write
from seqrec.errors import SeqRecError
from seqrec.identity import digest
from seqrec.locks import RunBusy, is_locked, lock_dir  # noqa: F401 - RunBusy: raised by _lock
from seqrec.reproduce.spec import RunSpec

log = logging.getLogger(__name__)

CHECKPOINT_EVERY = 25  # steps between checkpoints, besides every epoch end and validation

HISTORY_BINS = (1, 5, 10, 20, 50, 100, 200)
POPULARITY_GROUPS = ("head", "torso", "tail")


def code_version(model_name: str) -> str:
    from seqrec import __version__
    from seqrec.registry import get_model

    _, cls = get_model(model_name)
    return f"{__version__}/{cls.__name__}.r{getattr(cls, 'revision', 1)}"


def config_class(model_name: str) -> type:
    """The config class of a seqrec model or of a peer row."""
    from seqrec.reproduce import peers

    if peers.is_peer(model_name):
        return peers.PeerConfig
    from seqrec.registry import get_model

    return get_model(model_name)[0]


def identity(spec: RunSpec, fingerprint: str | None) -> dict[str, Any]:
    """Everything that determines the run's numbers, budget included
    (:func:`seqrec.identity.experiment_identity` with the eval section, fingerprint and code)."""
    from seqrec.identity import experiment_identity
    from seqrec.reproduce import peers

    exp = spec.experiment
    if peers.is_peer(exp.model):
        return peers.identity(spec, fingerprint)
    return experiment_identity(exp, with_eval=True, fingerprint=fingerprint,
                               code=code_version(exp.model))


def run_key(ident: dict[str, Any]) -> str:
    """:func:`seqrec.identity.run_key` of a stored or planned identity."""
    from seqrec.identity import run_key as key

    return key(ident, config_class(ident["model"]))


def compatible(stored: dict[str, Any], current: dict[str, Any], budget: bool = True) -> bool:
    """:func:`seqrec.identity.same_run` (``budget=False``: training only, as the key)."""
    from seqrec.identity import same_run

    return same_run(stored, current, config_class(current["model"]), training_only=not budget)


# --- executing a run --------------------------------------------------------------------------
_DATA_CACHE: dict[str, Any] = {}


def prepared_data(spec: RunSpec):
    """Load, preprocess and split the run's data once per process."""
    from seqrec.experiment import prepare_data

    exp = spec.experiment
    key = json.dumps([dataclasses.asdict(exp.data), dataclasses.asdict(exp.split)], sort_keys=True)
    if key not in _DATA_CACHE:
        _DATA_CACHE[key] = prepare_data(exp)
    return _DATA_CACHE[key]


STATE_FILES = ("last.pt", "run.json", "identity.json", "validation.jsonl")
# The checkpoint is kept xz-compressed in the state dir, its bytes first split into the four
# byte planes of float32 words (see ``pack_checkpoint``): the planes of signs and exponents are
# nearly constant and compress well, where interleaved with the mantissas they do not. Plain xz
# saved 8-10% (BERT4Rec ML-1M 5.53 -> 5.01 MB); byte planes save 18-20% (5.53 -> 4.50 MB, FISM
# 7.10 -> 5.71 MB). ``last.pt`` (uncompressed) and plain-xz packs of older code are still read.
PACKED_CHECKPOINT = "last.pt.xz"
_PLANES_MAGIC = b"seqrec-planes4\n"
STATE_KEEP_BYTES = 5_000_000
"""States above this are written but not meant to be committed (the harness says so)."""
LOCAL_ONLY_MARKER = ".gitignore"
"""Written into a state directory that is over ``STATE_KEEP_BYTES`` (content ``*``), so that
``git add reproduce-state`` leaves it out; removed when the state shrinks under the limit."""
PACK_MAX_RAW_BYTES = 2 * STATE_KEEP_BYTES
"""Checkpoints larger than this are copied plain: packing cannot bring them under the kept size
(it saves about 10%), and xz at this size takes tens of seconds of a busy core, longer than a
stop's grace period (a 40 MB SASRec Sports state was killed while being packed)."""


def pack_checkpoint(data: bytes) -> bytes:
    """xz of ``data`` rearranged into 4 byte planes (byte 0 of every 4-byte word, then byte 1,
    ...), the tail that does not fill a word kept as is; lossless (``unpack_checkpoint``)."""
    import numpy as np

    n = len(data) // 4 * 4
    planes = np.frombuffer(data, dtype=np.uint8, count=n).reshape(-1, 4).T.tobytes()
    return lzma.compress(_PLANES_MAGIC + planes + data[n:], preset=6)


def unpack_checkpoint(blob: bytes) -> bytes:
    """Inverse of ``pack_checkpoint``; a plain xz pack (older code) is returned decompressed."""
    import numpy as np

    data = lzma.decompress(blob)
    if not data.startswith(_PLANES_MAGIC):
        return data
    body = data[len(_PLANES_MAGIC):]
    n = len(body) // 4 * 4
    words = np.frombuffer(body, dtype=np.uint8, count=n).reshape(4, -1).T.tobytes()
    return words + body[n:]


def _state_checkpoint(src: Path) -> Path | None:
    """The state's checkpoint file: the packed or the plain one, the newer when both exist."""
    found = [f for f in (src / PACKED_CHECKPOINT, src / "last.pt") if f.exists()]
    return max(found, key=lambda f: f.stat().st_mtime_ns) if found else None


def resume_source(run_dir: Path, state_dir: Path | None) -> tuple[Path, int] | None:
    """The checkpoint an unfinished run would resume from here, and its size in bytes: its own
    run directory's first, else the saved state (None: it would start over)."""
    own = run_dir / "last.pt"
    found = own if own.exists() else None if state_dir is None else _state_checkpoint(state_dir / run_dir.name)
    return None if found is None else (found, found.stat().st_size)


def restore_state(run_dir: Path, state_dir: Path | None) -> bool:
    """Seed an absent checkpoint directory from the committed state of an unfinished run."""
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
    """Keep an unfinished run's checkpoint where it survives a fresh checkout (the state dir
    is committed; the checkpoint xz-compressed); a finished run's state is dropped, its record
    is the cache."""
    if state_dir is None:
        return
    dst = state_dir / run_dir.name
    if finished:
        for name in (*STATE_FILES, PACKED_CHECKPOINT, LOCAL_ONLY_MARKER):
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
            mark_local_only(dst, len(data))
            if len(data) > STATE_KEEP_BYTES:
                log.warning("the saved state of %s is %.1f MB (over the %.0f MB kept in the "
                            "repository): it resumes on this machine only", run_dir.name,
                            len(data) / 1e6, STATE_KEEP_BYTES / 1e6)
        else:
            atomic_write(dst / name, lambda fh, data=data: fh.write(data))


def mark_local_only(state: Path, size: int) -> None:
    """Make a state directory over ``STATE_KEEP_BYTES`` invisible to git (a ``.gitignore`` of
    ``*`` inside it), and visible again once it is back under the limit."""
    marker = state / LOCAL_ONLY_MARKER
    if size > STATE_KEEP_BYTES:
        state.mkdir(parents=True, exist_ok=True)
        marker.write_text("# over the size kept in the repository: resumes on this machine only\n*\n")
    else:
        marker.unlink(missing_ok=True)


def execute(
    spec: RunSpec, key: str, ident: dict[str, Any], runs_dir: Path, results_dir: Path,
    threads: int = 1, deadline: float | None = None, command: str = "",
    state_dir: Path | None = None, first: bool = False,
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
    from seqrec.reproduce import peers

    if peers.is_peer(spec.model):  # another library's model, in its own venv (see peers.py)
        return peers.execute(spec, key, ident, runs_dir, results_dir, threads, deadline, command,
                             state_dir, first)
    if deadline is not None and not first and time.time() >= deadline:
        raise BudgetSpent(f"{spec.run_id} seed {spec.seed}: not started, the time budget is spent")
    if threads:
        torch.set_num_threads(threads)
    t_start = time.perf_counter()
    data = prepared_data(spec)
    split, exp = data.split, spec.experiment
    config_cls, model_cls = get_model(exp.model)
    cfg = exp.model_config()
    if threads and "num_threads" in {f.name for f in dataclasses.fields(cfg)}:
        cfg = dataclasses.replace(cfg, num_threads=threads)
    run_dir = runs_dir / key
    run_dir.mkdir(parents=True, exist_ok=True)
    with _lock(run_dir):  # one process per run: two tables sharing a run never train it twice
        restore_state(run_dir, state_dir)
        atomic_write(run_dir / "identity.json", lambda fh: fh.write(json.dumps({"key": key, "identity": ident}, indent=2).encode()))
        model = model_cls(cfg)
        t0 = time.perf_counter()
        neural = isinstance(model, TorchRecommender)
        with peers.LoadSampler() as load:
            if neural:
                model.fit(split.train, split.valid, checkpoint_dir=run_dir, checkpoint_every=CHECKPOINT_EVERY,
                          progress=False, deadline=deadline)
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
        test = evaluate_model(model, exp, split.test, fit_data=split.train_valid if refitted else split.train)
        history = list(getattr(tlog, "history", []) or [])
        train_seconds = getattr(tlog, "train_seconds", None) if tlog is not None else fit_wall
        steps = getattr(tlog, "global_step", 0) if tlog is not None else 0
        record = result_record(
            model=exp.model,
            variant=getattr(cfg, "loss", None) or getattr(cfg, "variant", None),
            dataset=exp.data.name, fingerprint=ident["fingerprint"], protocol=split.protocol,
            results={"valid": valid, "test": test}, seed=exp.seed,
            config=exp.to_dict() | {"model_config": config_to_dict(cfg)},
            epochs=getattr(model, "epochs_trained", None), train_seconds=train_seconds,
            key=key, identity=ident, code_version=ident["code"], partial=partial,
            stopped=getattr(tlog, "stopped", "fitted") if tlog is not None else "fitted",
            best_epoch=getattr(tlog, "best_epoch", None), best_valid=getattr(tlog, "best_metric", None),
            val_metric=getattr(cfg, "val_metric", None), global_step=steps,
            step_seconds=(train_seconds / steps) if steps else None,
            fit_wall_seconds_this_process=fit_wall, wall_seconds_this_process=time.perf_counter() - t_start,
            params=n_params(model), validation_history=history,
            breakdown=breakdown(split, {"valid": split.valid, "test": split.test}, {"valid": valid, "test": test}),
            data={"users": data.prepared.n_users, "items": data.prepared.n_items,
                  "interactions": len(data.prepared.interactions),
                  "preprocessing": list(data.prepared.interactions.notes)},
            split_info=split.info, data_seconds=data.seconds, torch_threads=threads,
            coverage_denominator={"valid": valid.coverage_denominator, "test": test.coverage_denominator},
            # the process's peak so far: a worker that ran an earlier run reports that run's peak too
            peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            load_average=load.summary(),
            refit_epochs=getattr(model.config, "epochs", None) if refitted else None,
        )
        record["command"] = command or record["command"]
        write_record(record, results_dir, key, partial)
        if neural:
            save_state(run_dir, state_dir, finished=not partial)
        return record


class BudgetSpent(SeqRecError):
    """The harness's time budget ran out before this run started."""


def _lock(run_dir: Path):
    """Hold ``<run_dir>/lock`` exclusively for the run, or raise ``RunBusy`` (``seqrec.locks``)."""
    return lock_dir(run_dir, "lock", f"{run_dir} is being trained by another process; rerun when it is done")


def is_training(run_dir: Path) -> bool:
    """Whether another process holds the run's lock now (a dry run's "training now")."""
    return is_locked(run_dir, "lock")


def write_record(record: dict[str, Any], results_dir: Path, key: str, partial: bool) -> Path:
    from seqrec.evaluation.results import _json_default

    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / (f"{key}.partial.json" if partial else f"{key}.json")
    if not partial and path.exists():
        # the key leaves the budget out: a finished run of this key with another budget (another
        # table's row) keeps its file, and this one goes beside it (find_result reads both)
        try:
            other = json.loads(path.read_text()).get("identity")
        except (OSError, ValueError):
            other = None
        mine = record.get("identity")
        if other and mine and other != mine:
            path = results_dir / f"{key}-{digest(mine)[:8]}.json"
    text = json.dumps(record, indent=1, default=_json_default) + "\n"
    atomic_write(path, lambda fh: fh.write(text.encode()))
    if not partial:
        (results_dir / f"{key}.partial.json").unlink(missing_ok=True)
    return path


def n_params(model: Any) -> int | None:
    """Trainable parameters of a neural model; stored factors of a factorization model."""
    enc = getattr(model, "encoder", None)
    if enc is not None:
        return int(sum(p.numel() for p in enc.parameters()))
    try:
        return int(sum(np.asarray(v).size for v in model._state().values()))
    except Exception:  # noqa: BLE001 - a model without saveable state has no count to show
        return None


# --- breakdowns -------------------------------------------------------------------------------
def popularity_groups(train_counts: np.ndarray) -> np.ndarray:
    """Group of every item id by training popularity: 0 head, 1 torso, 2 tail.

    Items sorted by training count; head = the most popular items that together hold the first
    third of the training interactions, torso the next third, tail the rest (and never-seen
    items). Thirds of interactions, not of items, so each group carries equal traffic.
    """
    counts = np.asarray(train_counts, np.float64)
    order = np.argsort(-counts, kind="stable")
    share = np.cumsum(counts[order]) / max(counts.sum(), 1.0)
    group = np.full(len(counts), 2, np.int64)
    before = share - counts[order] / max(counts.sum(), 1.0)  # share held by more popular items
    group[order[before < 1 / 3]] = 0
    group[order[(before >= 1 / 3) & (before < 2 / 3)]] = 1
    group[counts == 0] = 2
    return group


def breakdown(split, targets: dict, results: dict, k: int = 10) -> dict[str, Any]:
    """NDCG@k / HR@k per history-length bin and per target-popularity group, each split."""
    counts = split.train.item_counts()
    groups = popularity_groups(counts)
    out: dict[str, Any] = {"k": k, "history_bins": list(HISTORY_BINS),
                           "popularity": "thirds of training interactions"}
    for name, res in results.items():
        tg = targets[name]
        ranks = np.asarray(res.ranks)
        hit = ranks < k
        ndcg = np.where(hit, 1.0 / np.log2(ranks + 2.0), 0.0)
        lengths = np.asarray(tg.cutoffs)
        rows = []
        edges = [*HISTORY_BINS, np.inf]
        for lo, hi in zip(edges[:-1], edges[1:], strict=True):
            m = (lengths >= lo) & (lengths < hi)
            label = f"{lo}-{int(hi) - 1}" if np.isfinite(hi) else f"{lo}+"
            rows.append(_group_row(label, m, hit, ndcg, k))
        pop = []
        target_group = groups[np.minimum(np.asarray(tg.items), len(groups) - 1)]
        for gi, label in enumerate(POPULARITY_GROUPS):
            pop.append(_group_row(label, target_group == gi, hit, ndcg, k))
        out[name] = {"history_length": rows, "target_popularity": pop}
    return out


def _group_row(label: str, mask: np.ndarray, hit: np.ndarray, ndcg: np.ndarray, k: int) -> dict:
    n = int(mask.sum())
    return {"group": label, "n": n,
            f"NDCG@{k}": float(ndcg[mask].mean()) if n else None,
            f"HR@{k}": float(hit[mask].mean()) if n else None}
