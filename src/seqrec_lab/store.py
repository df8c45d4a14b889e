"""The files and shared pieces of one reproduction run, used by both kinds of run (a seqrec
model, :mod:`seqrec_lab.runner`; another library's, :mod:`seqrec_lab.peers`): the prepared
data, the record, the run lock, packed checkpoints and the accuracy breakdowns. It imports
neither of them, so that they do not import each other.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import lzma
from pathlib import Path
from typing import Any

import numpy as np

from seqrec.atomic import atomic_write
from seqrec.errors import SeqRecError
from seqrec.locks import RunBusy, is_locked, lock_dir  # noqa: F401 - RunBusy: raised by _lock

HISTORY_BINS = (1, 5, 10, 20, 50, 100, 200)
POPULARITY_GROUPS = ("head", "torso", "tail")

_PLANES_MAGIC = b"seqrec-planes4\n"

_DATA_CACHE: dict[str, Any] = {}


def prepared_data(spec):
    """Load, preprocess and split the run's data once per process."""
    from seqrec.experiment import prepare_data

    exp = spec.experiment
    key = json.dumps([dataclasses.asdict(exp.data), dataclasses.asdict(exp.split)], sort_keys=True)
    if key not in _DATA_CACHE:
        _DATA_CACHE[key] = prepare_data(exp)
    return _DATA_CACHE[key]


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
    body = data[len(_PLANES_MAGIC) :]
    n = len(body) // 4 * 4
    words = np.frombuffer(body, dtype=np.uint8, count=n).reshape(4, -1).T.tobytes()
    return words + body[n:]


class BudgetSpent(SeqRecError):
    """The harness's time budget ran out before this run started."""


def _lock(run_dir: Path):
    """Hold ``<run_dir>/lock`` exclusively for the run, or raise ``RunBusy`` (``seqrec.locks``)."""
    return lock_dir(
        run_dir, "lock", f"{run_dir} is being trained by another process; rerun when it is done"
    )


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
            path = results_dir / f"{key}-{_record_hash(mine)}.json"
    text = json.dumps(record, indent=1, default=_json_default) + "\n"
    atomic_write(path, lambda fh: fh.write(text.encode()))
    if not partial:
        (results_dir / f"{key}.partial.json").unlink(missing_ok=True)
    return path


def _record_hash(identity: dict[str, Any]) -> str:
    """8 hex of the identity's sha256 (the file name of a second finished record of one key)."""
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[
        :8
    ]


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
    out: dict[str, Any] = {
        "k": k,
        "history_bins": list(HISTORY_BINS),
        "popularity": "thirds of training interactions",
    }
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
    return {
        "group": label,
        "n": n,
        f"NDCG@{k}": float(ndcg[mask].mean()) if n else None,
        f"HR@{k}": float(hit[mask].mean()) if n else None,
    }
