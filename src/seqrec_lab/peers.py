"""Peer rows of a reproduction table: another library's model, trained in its own virtual
environment, scored by seqrec's evaluator.

Design (the least intrusive one found): a run whose model name is ``peer:<library>``
(``peer:rectools``, ``peer:recbole``) is an ordinary row of an ordinary table. The table parser
(:mod:`.spec`) validates its parameters as a :class:`PeerConfig` instead of a registered model
config, and :func:`seqrec_lab.runner.execute` hands it to :func:`execute` here instead of
fitting a seqrec model. Everything else is the harness's: the identity and key (the peer's
config, the data, split and evaluation sections, the data fingerprint, and a code version made of
seqrec's version, the library's pinned version and the worker's revision), the cache, the worker
processes, the record (DESIGN section 4, plus ``library`` / ``library_version``) and the report.
Peers are never registered models (``seqrec models`` and the conformance suite do not see them)
and never dependencies of seqrec: :func:`ensure_venv` installs each into ``<runs>/peers/<library>``.

One peer run: the run's split (seqrec's own, from the table's data/split sections) is exported
into the run directory (``split.npz`` and CSV files: seqrec's internal user and item ids), the
library's worker script (``seqrec_lab/workers/peer_<library>.py``) trains there in a subprocess
with one torch thread and writes the top-k lists of the validation users (input: the training
items) and of the test users (input: training + validation items, no refit), one validation list
file per epoch, its training seconds per epoch and its peak resident memory. The lists are
scored here with :func:`seqrec.experiment.evaluate_model` under the table's ``[eval]`` section,
so the metric code is one for every library; the per-epoch validation lists become the record's
``validation_history`` in the trainer's shape (``epoch``, ``train_seconds``, ``metrics``).

A run stopped by the harness's time budget (``deadline``, passed to the worker, which stops
after the epoch that crosses it) or by a signal to the harness (the worker sees a ``STOP`` file
in its run directory, or a SIGINT / SIGTERM of its own, and stops after that epoch) is a partial record of the best epoch so far. RecBole's worker
and RecTools' workers save their last epoch and the same command resumes it (the resume files,
checkpoints packed, and the scores of the validation lists so far, are kept in the state
directory, like a seqrec run's checkpoint, until the run finishes). Lists hold the top ``k`` items (default
20), so metrics at cut-offs above ``k`` are not defined for peers.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import logging
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from seqrec import stop
from seqrec.config_fields import BUDGET, PLACEMENT, setting
from seqrec.errors import ConfigError, SeqRecError

log = logging.getLogger(__name__)

PREFIX = "peer:"
# Each library: the pinned packages of its venv (RecBole 1.2.1 predates NumPy 2 and pandas 2.2's
# removals, so it gets the older releases), the interpreter that creates the venv, and the
# worker's revision (bumped when the worker's behaviour changes: part of the run's identity).
# Resuming an interrupted run did not bump a revision: a run that is never stopped trains
# exactly as before, so the records of that revision still describe it.
PEERS: dict[str, dict[str, Any]] = {
    "rectools": {
        "python": "python3.11",
        "version": "0.19.0",
        "revision": 2,
        "packages": ["torch==2.13.0", "rectools[torch]==0.19.0"],
    },
    "recbole": {
        "python": "python3.11",
        "version": "1.2.1",
        "revision": 2,
        "packages": ["torch==2.13.0", "recbole==1.2.1", "numpy<1.24", "pandas<2", "scipy<1.12"],
    },
}


def is_peer(model: str) -> bool:
    return model.startswith(PREFIX)


@dataclass(frozen=True)
class PeerConfig:
    """What a peer row trains: the library and the sizes shared with seqrec's row."""

    library: str = "rectools"
    """Which library (a key of :data:`PEERS`)."""
    dim: int = 64
    """Hidden size (RecTools ``n_factors``, RecBole ``hidden_size``). The feed-forward width
    is each library's own: RecTools d (as seqrec's SASRec), RecBole ``inner_size`` 4 x d."""
    n_blocks: int = 2
    """Transformer blocks."""
    n_heads: int = 1
    """Attention heads."""
    max_len: int = 50
    """Longest input history (RecTools ``session_max_len``, RecBole ``MAX_ITEM_LIST_LENGTH``)."""
    dropout: float = 0.2
    """Dropout rate (RecTools ``dropout_rate``; RecBole hidden and attention dropout)."""
    epochs: int = setting(100, role=BUDGET)
    """Epoch cap (with ``selection = "library"`` RecTools trains exactly this many: it has no
    early stopping)."""
    patience: int = setting(10, role=BUDGET)
    """Validations without improvement before early stopping (RecBole's ``stopping_step``;
    RecTools only with ``selection = "filtered"``)."""
    selection: str = setting("library", legacy="library")
    """Which epoch a peer keeps: ``"library"``, the library's own rule (RecTools: the last
    epoch; RecBole: the best on its own unfiltered validation); ``"filtered"``, seqrec's rule
    (the best validation NDCG@10 on seqrec's filtered protocol, stopping after ``patience``
    epochs without improvement) for every library."""
    k: int = 20
    """Length of the top-k lists the worker returns (metrics need cut-offs <= k)."""
    seed: int = 0
    """Seed of the library's own RNGs."""
    num_threads: int = setting(1, role=PLACEMENT)
    """Torch threads of the worker (placement: not part of the identity)."""

    def __post_init__(self) -> None:
        if self.library not in PEERS:
            raise ConfigError(
                f"peer library must be one of {', '.join(sorted(PEERS))}, got {self.library!r}"
            )
        for name in (
            "dim",
            "n_blocks",
            "n_heads",
            "max_len",
            "epochs",
            "patience",
            "k",
            "num_threads",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"peer {name} must be >= 1, got {getattr(self, name)}")
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"peer dropout must be in [0, 1), got {self.dropout}")
        if self.seed < 0:
            raise ConfigError(f"peer seed must be >= 0, got {self.seed}")
        if self.selection not in ("library", "filtered"):
            raise ConfigError(
                f"peer selection must be 'library' or 'filtered', got {self.selection!r}"
            )
        if self.dim % self.n_heads:
            raise ConfigError(
                f"peer dim must be divisible by n_heads, got dim {self.dim}, n_heads {self.n_heads}"
            )


FIELDS = tuple(f.name for f in dataclasses.fields(PeerConfig))


def peer_config(model: str, params: dict[str, Any], seed: int) -> PeerConfig:
    """``peer:<library>`` + the row's model/train keys -> a validated :class:`PeerConfig`."""
    from seqrec.config import build_dataclass

    library = model[len(PREFIX) :]
    if "library" in params:
        raise ConfigError(
            f"model {model!r}: the library is named by the model name, not a library key"
        )
    values = {**params, "library": library}
    values.setdefault("seed", seed)
    return build_dataclass(PeerConfig, values, f"model '{model}'")


def code_version(library: str) -> str:
    from seqrec import __version__

    spec = PEERS[library]
    return f"{__version__}/peer-{library}-{spec['version']}.r{spec['revision']}"


def identity(spec, fingerprint: str) -> dict[str, Any]:
    """The run's identity, in the shape of :func:`seqrec_lab.runner.identity`."""
    from seqrec.identity import experiment_identity

    exp = spec.experiment
    cfg = peer_config(exp.model, exp.model_params, exp.seed)
    return experiment_identity(
        exp, with_eval=True, config=cfg, fingerprint=fingerprint, code=code_version(cfg.library)
    )


# --- environment -----------------------------------------------------------------------------
def worker_dir() -> Path:
    """The peer worker scripts (:mod:`seqrec_lab.workers`): files of this package, so that an
    installed package runs a peer row without a checkout."""
    return Path(__file__).resolve().parent / "workers"


CPU_TORCH_INDEX = "https://download.pytorch.org/whl/cpu"


def torch_index() -> str | None:
    """Where a peer's venv takes torch from: ``SEQREC_TORCH_INDEX`` if set (``default``: the
    default index), else PyTorch's CPU index when seqrec's own torch is a CPU build (as
    ``scripts/bootstrap.sh`` chose it: a plain ``torch`` pin on the public index pulls the CUDA
    build with several GB of NVIDIA libraries), else None (the default index)."""
    forced = os.environ.get("SEQREC_TORCH_INDEX")
    if forced:
        return None if forced == "default" else forced
    import torch

    return None if torch.version.cuda else CPU_TORCH_INDEX


def ensure_venv(library: str, venv_root: Path) -> Path:
    """``<venv_root>/<library>/bin/python`` with the pinned packages installed (once; locked, so
    two runs of one library never install at the same time)."""
    import shutil

    spec = PEERS[library]
    venv = venv_root / library
    python = venv / "bin" / "python"
    venv_root.mkdir(parents=True, exist_ok=True)
    with open(venv_root / f"{library}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stamp = venv / ".installed.json"
        if stamp.exists() and json.loads(stamp.read_text()) == spec["packages"]:
            return python
        if not python.exists():
            if shutil.which(spec["python"]) is None:
                raise SeqRecError(
                    f"peer:{library} runs in its own virtual environment made with {spec['python']}, "
                    f"which is not on PATH (its pinned packages need that Python); install it, or "
                    f"leave the peer rows out (--runs / --models)"
                )
            subprocess.run([spec["python"], "-m", "venv", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q"]
        pinned = next((p for p in spec["packages"] if p.startswith("torch==")), None)
        index = torch_index()
        if pinned and index:  # torch alone from that index; its dependencies come next
            log.warning("installing %s into %s from %s (once)", pinned, venv, index)
            if subprocess.run(
                [*pip, "--index-url", index, "--no-deps", "--timeout", "30", pinned]
            ).returncode:
                log.warning(
                    "installing %s from %s failed: the default index is used", pinned, index
                )
        log.warning("installing %s into %s (once)", " ".join(spec["packages"]), venv)
        if subprocess.run([*pip, *spec["packages"]]).returncode:
            raise SeqRecError(
                f"installing peer:{library}'s packages ({' '.join(spec['packages'])}) into {venv} "
                f"failed (pip's output is above): the first run of a peer row needs a package "
                f"index; rerun the same command to retry"
            )
        stamp.write_text(json.dumps(spec["packages"]))
    return python


def export_split(split, work: Path) -> None:
    """seqrec's split -> ``split.npz`` (CSR arrays) and the CSV files the workers read:
    ``train.csv`` (user, item, position: the order of the histories), ``valid.csv`` and
    ``test.csv`` (user, target). User ``r + 1`` is row ``r`` of the training sequences."""
    users = np.asarray(split.valid.rows)
    if not np.array_equal(users, np.asarray(split.test.rows)):
        raise ConfigError(
            "peer rows need one validation and one test target per user (leave-last-out)"
        )
    work.mkdir(parents=True, exist_ok=True)
    tr = split.train
    np.savez(
        work / "split.npz",
        n_items=tr.n_items,
        train_offsets=tr.offsets,
        train_items=tr.items,
        train_valid_offsets=split.train_valid.offsets,
        train_valid_items=split.train_valid.items,
        eval_rows=users,
        valid_items=split.valid.items,
        test_items=split.test.items,
    )
    lengths = np.diff(np.asarray(tr.offsets))
    user_col = np.repeat(np.arange(1, len(lengths) + 1), lengths)
    items = np.asarray(tr.items)[int(tr.offsets[0]) : int(tr.offsets[-1])]
    table = np.stack([user_col, items, np.arange(len(user_col))], 1)
    np.savetxt(
        work / "train.csv",
        table,
        fmt="%d",
        delimiter=",",
        header="user_id,item_id,position",
        comments="",
    )
    for name, t in (("valid", split.valid), ("test", split.test)):
        rows = np.stack([np.asarray(t.rows) + 1, np.asarray(t.items)], 1)
        np.savetxt(
            work / f"{name}.csv",
            rows,
            fmt="%d",
            delimiter=",",
            header="user_id,item_id",
            comments="",
        )


class TopKLists:
    """A ``Recommender`` stand-in over fixed top-k lists, so that seqrec's evaluator scores
    another library's recommendations: listed items score k, k-1, ..., every other item 0, and
    the pessimistic tie rule puts an unlisted target below all listed items (a miss at k).
    Lists are looked up by the input history, so the evaluator's own batching cannot mix them."""

    def __init__(self, histories, users: np.ndarray, topk: np.ndarray, n_items: int, max_len: int):
        self.n_items = n_items
        self.config = type("ListsConfig", (), {"max_len": max_len})()  # for window filters
        self.lists = {
            histories.row(int(row)).tobytes(): top for row, top in zip(users, topk, strict=True)
        }

    def score(self, histories, query_times=None) -> np.ndarray:
        out = np.zeros((len(histories), self.n_items + 1))
        out[:, 0] = -np.inf
        for i in range(len(histories)):
            top = self.lists[np.asarray(histories.row(i), np.int64).tobytes()]
            top = top[(top >= 1) & (top <= self.n_items)]
            out[i, top] = np.arange(len(top), 0, -1)
        return out


class LoadSampler:
    """The machine's 1-minute load average, sampled every ``every`` seconds while it runs (the
    peers table records the load each run shared the machine with)."""

    def __init__(self, every: float = 15.0):
        self.every, self.samples = every, [os.getloadavg()[0]]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self.samples.append(os.getloadavg()[0])

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append(os.getloadavg()[0])

    def summary(self) -> dict[str, float]:
        s = self.samples
        return {
            "mean": float(np.mean(s)),
            "min": float(np.min(s)),
            "max": float(np.max(s)),
            "samples": len(s),
        }


# --- one run ---------------------------------------------------------------------------------
STOP_FILE = "STOP"
"""Written into the run directory when the harness is asked to stop: the worker ends after the
current epoch, saving it (``stopped = "interrupted"``), as it does past its deadline."""


def _parent_death_signal():
    """``prctl`` of the C library, looked up in the parent (Linux), or None. A ``preexec_fn``
    runs between fork and exec while other threads (the load sampler) may hold locks: it must
    not load libraries or import there, only make this one call."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def run_worker_preexec():
    """A ``preexec_fn`` giving the worker SIGKILL when the process that started it dies, so that
    a harness worker killed past its stop grace (``harness.STOP_GRACE_SECONDS``) or by ``kill
    -9`` leaves no peer training on alone (None where ``prctl`` is missing)."""
    prctl = _parent_death_signal()
    if prctl is None:
        return None
    return lambda: prctl(1, int(signal.SIGKILL))  # 1 = PR_SET_PDEATHSIG


def run_worker(
    cfg: PeerConfig,
    python: Path,
    work: Path,
    deadline: float | None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run ``peer_<library>.py`` in ``work``; its ``info.json`` with ``wall_seconds`` added.
    ``extra`` adds worker arguments outside the run's identity (e.g. RecBole's ``time_batches``
    timing probe, ``docs/results/recbole_epoch_*.md``)."""
    worker = worker_dir() / f"peer_{cfg.library}.py"
    args = {**dataclasses.asdict(cfg), "deadline": deadline, **(extra or {})}
    env = dict(
        os.environ, OMP_NUM_THREADS=str(cfg.num_threads), MKL_NUM_THREADS=str(cfg.num_threads)
    )
    env.pop("PYTHONPATH", None)  # the peer's venv only: seqrec is not importable there
    (work / "info.json").unlink(missing_ok=True)
    stop_file = work / STOP_FILE
    stop_file.unlink(missing_ok=True)
    t0 = time.perf_counter()
    with open(work / "worker.log", "w") as logf:
        proc = subprocess.Popen(
            [str(python), str(worker), str(work), str(work), json.dumps(args)],
            env=env,
            stdout=logf,
            stderr=subprocess.STDOUT,
            cwd=work,
            preexec_fn=run_worker_preexec(),
        )
        try:
            # a stop request (a signal to the harness) reaches the worker as a file it checks
            # after each epoch, like its deadline: the epoch is saved and the run resumes later
            while proc.poll() is None:
                if stop.requested() and not stop_file.exists():
                    stop_file.touch()
                    log.warning(
                        "asked the %s worker to stop after its current epoch (it saves that "
                        "epoch; a second signal kills it, losing the epoch)",
                        cfg.library,
                    )
                time.sleep(0.5)
        finally:
            if proc.poll() is None:  # an error or a second signal here: no orphan worker
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    stop_file.unlink(missing_ok=True)
    wall = time.perf_counter() - t0
    if proc.returncode:
        tail = (work / "worker.log").read_text()[-3000:]
        raise SeqRecError(
            f"{cfg.library} worker failed (rc {proc.returncode}); see {work / 'worker.log'}:\n{tail}"
        )
    info = json.loads((work / "info.json").read_text())
    info["wall_seconds"] = wall
    return info


def _lists(work: Path, name: str) -> np.ndarray:
    return np.load(work / name)


# What a resumable worker (RecBole's, RecTools') leaves for its next call; kept in the local
# state dir while the run is unfinished. The per-epoch
# validation lists are not kept (on ML-1M one is 1 MB): their scores are, in CURVE_SCORES, and
# the checkpoints are packed like a seqrec run's (``store.pack_checkpoint``, ``<name>.xz``).
STATE_GLOBS = ("identity.json", "worker_state.json", "curve_scores.json")
STATE_CHECKPOINTS = ("ckpt/last.pth", "ckpt/best.pth")
CURVE_SCORES = "curve_scores.json"


def save_state(work: Path, state_dir: Path | None, finished: bool) -> None:
    """Copy an unfinished peer run's resume files to ``state_dir/<key>`` (drop them once finished)."""
    import shutil

    from seqrec_lab import store

    if state_dir is None:
        return
    dst = state_dir / work.name
    if finished:
        shutil.rmtree(dst, ignore_errors=True)
        return
    if not (work / "worker_state.json").exists():
        return  # the worker cannot resume: nothing worth keeping
    shutil.rmtree(dst, ignore_errors=True)  # no stale files of an earlier stop
    for pattern in STATE_GLOBS:
        for src in work.glob(pattern):
            target = dst / src.relative_to(work)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, target)
    for name in STATE_CHECKPOINTS:
        if (work / name).exists():
            target = dst / f"{name}.xz"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(store.pack_checkpoint((work / name).read_bytes()))


def resume_source(work: Path, state_dir: Path | None) -> tuple[Path, int] | None:
    """What an unfinished peer run would resume from here, and its size in bytes: its run
    directory's checkpoint first, else its saved state (None: it would start over)."""
    own = work / "ckpt" / "last.pth"
    if own.exists() and (work / "worker_state.json").exists():
        return own, own.stat().st_size
    saved = None if state_dir is None else state_dir / work.name
    if saved is None or not (saved / "worker_state.json").exists():
        return None
    return saved, sum(f.stat().st_size for f in saved.rglob("*") if f.is_file())


def restore_state(work: Path, state_dir: Path | None) -> bool:
    """Seed a run directory without a checkpoint from ``state_dir/<key>`` (packed checkpoints
    unpacked; plain ones, of older code, copied)."""
    import shutil

    from seqrec_lab import store

    src = None if state_dir is None else state_dir / work.name
    if (
        src is None
        or (work / "ckpt" / "last.pth").exists()
        or not (src / "worker_state.json").exists()
    ):
        return False
    for path in src.rglob("*"):
        if not path.is_file():
            continue
        rel = path.relative_to(src)
        if rel.suffix == ".xz" and str(rel.with_suffix("")) in STATE_CHECKPOINTS:
            target = work / rel.with_suffix("")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(store.unpack_checkpoint(path.read_bytes()))
        else:
            target = work / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    log.info("resuming peer run %s from the saved state in %s", work.name, src)
    return True


def score_curve(work: Path, curve: list[dict], score) -> list[dict]:
    """The per-epoch validation lists of ``curve`` -> the record's ``validation_history``. Each
    list's metrics are cached in ``CURVE_SCORES`` (kept with a resumable state), so that the
    epochs before a resume need their list files no more."""
    path = work / CURVE_SCORES
    cache = json.loads(path.read_text()) if path.exists() else {}
    history = []
    for point in curve:
        name = point["topk_file"]
        if (work / name).exists():
            cache[name] = {
                k: float(v) for k, v in score("valid", _lists(work, name)).metrics.items()
            }
        elif name not in cache:
            raise SeqRecError(
                f"peer run {work.name}: validation list {name} is neither on disk nor scored"
            )
        history.append(
            {
                "epoch": point["epoch"],
                "train_seconds": point["seconds"],
                "metrics": cache[name],
                **{k: v for k, v in point.items() if k not in ("epoch", "seconds", "topk_file")},
            }
        )
    path.write_text(json.dumps(cache))
    return history


def execute(
    spec,
    key: str,
    ident: dict[str, Any],
    runs_dir: Path,
    results_dir: Path,
    threads: int = 1,
    deadline: float | None = None,
    command: str = "",
    state_dir: Path | None = None,
    first: bool = False,
) -> dict[str, Any]:
    """Train one peer row in its venv, score its lists, write its record (the harness's shape)."""
    from seqrec.evaluation.results import result_record
    from seqrec.experiment import evaluate_model
    from seqrec_lab import store

    if deadline is not None and not first and time.time() >= deadline:
        raise store.BudgetSpent(
            f"{spec.run_id} seed {spec.seed}: not started, the time budget is spent"
        )
    t_start = time.perf_counter()
    exp = spec.experiment
    cfg = peer_config(exp.model, exp.model_params, exp.seed)
    if threads:
        cfg = dataclasses.replace(cfg, num_threads=threads)
    too_deep = [k for k in exp.eval.ks if k > cfg.k]
    if too_deep:
        raise ConfigError(
            f"{spec.run_id}: eval.ks {too_deep} exceed the peer's list length k = {cfg.k}"
        )
    data = store.prepared_data(spec)
    split = data.split
    work = (runs_dir / key).resolve()  # the worker runs inside it: no relative paths
    work.mkdir(parents=True, exist_ok=True)
    lock = store._lock(work)
    (work / "identity.json").write_text(json.dumps({"key": key, "identity": ident}, indent=2))
    export_split(split, work)
    restore_state(work, state_dir)
    python = ensure_venv(cfg.library, runs_dir.resolve().parent / "peers")
    with LoadSampler() as load:
        info = run_worker(cfg, python, work, deadline)
    users = np.asarray(split.valid.rows)
    n_items = split.train.n_items

    def score(name: str, lists: np.ndarray):
        targets, hist = (
            (split.valid, split.train) if name == "valid" else (split.test, split.train_valid)
        )
        model = TopKLists(hist, users, lists, n_items, cfg.max_len)
        return evaluate_model(model, exp, targets, fit_data=split.train)

    valid = score("valid", _lists(work, "valid_topk.npy"))
    test = score("test", _lists(work, "test_topk.npy"))
    history = score_curve(work, info.get("curve", []), score)
    partial = info.get("stopped") in ("deadline", "interrupted")
    val_metric = "NDCG@10"
    best = max(history, key=lambda h: h["metrics"].get(val_metric, -1.0)) if history else None
    epochs = info.get("epochs")
    record = result_record(
        model=exp.model,
        variant=info.get("loss"),
        dataset=exp.data.name,
        fingerprint=ident["fingerprint"],
        protocol=split.protocol,
        results={"valid": valid, "test": test},
        seed=exp.seed,
        config=exp.to_dict() | {"model_config": dataclasses.asdict(cfg)},
        epochs=epochs,
        train_seconds=info["fit_seconds"],
        key=key,
        identity=ident,
        code_version=ident["code"],
        partial=partial,
        stopped=info.get("stopped", "epochs"),
        library=cfg.library,
        library_version=info.get("version"),
        library_config=info.get("config"),
        selected_epoch=info.get("selected_epoch"),
        best_epoch=best["epoch"] if best else None,
        best_valid=best["metrics"][val_metric] if best else None,
        val_metric=val_metric,
        global_step=info.get("steps"),
        step_seconds=info["fit_seconds"] / info["steps"] if info.get("steps") else None,
        seconds_per_epoch=info["fit_seconds"] / epochs if epochs else None,
        peak_rss_mb=info.get("peak_rss_mb"),
        load_average=load.summary(),
        fit_wall_seconds_this_process=info["wall_seconds"],
        wall_seconds_this_process=time.perf_counter() - t_start,
        params=info.get("params"),
        validation_history=history,
        breakdown=store.breakdown(
            split, {"valid": split.valid, "test": split.test}, {"valid": valid, "test": test}
        ),
        data={
            "users": data.prepared.n_users,
            "items": data.prepared.n_items,
            "interactions": len(data.prepared.interactions),
            "preprocessing": list(data.prepared.interactions.notes),
        },
        split_info=split.info,
        data_seconds=data.seconds,
        torch_threads=cfg.num_threads,
        coverage_denominator={
            "valid": valid.coverage_denominator,
            "test": test.coverage_denominator,
        },
    )
    record["command"] = command or record["command"]
    store.write_record(record, results_dir, key, partial)
    save_state(work, state_dir, finished=not partial)
    lock.close()
    return record
