"""Atomic, pickle-free training checkpoints.

A checkpoint is a plain ``dict`` of tensors, numbers, strings, lists, tuples and dicts written
with ``torch.save`` to a temporary file in the same directory, fsync'ed and renamed over the
target (so a crash never leaves a half-written checkpoint). It is read back with
``torch.load(weights_only=True)``: no arbitrary object is ever unpickled.
"""

from __future__ import annotations

import os
import random
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from seqrec.errors import DataError


def save_checkpoint(path: str | Path, payload: dict[str, Any]) -> Path:
    """Write ``payload`` to ``path`` atomically (temp file, fsync, rename, fsync dir)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            torch.save(payload, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    # a writer killed mid-write (SIGKILL skips the cleanup above) leaves its temp file behind;
    # one writer per run directory, so any older temp file of this checkpoint is stale
    for stale in path.parent.glob(f"{path.name}*.tmp"):
        stale.unlink(missing_ok=True)
    try:  # make the rename itself durable
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:  # pragma: no cover - some filesystems refuse fsync on directories
        pass
    return path


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint` (``weights_only=True``)."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"no checkpoint at {path}")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # corrupt file or a disallowed type inside
        raise DataError(f"cannot read checkpoint {path}: {exc}") from exc


def rng_state() -> dict[str, Any]:
    """Global RNG states of torch, NumPy (legacy) and Python as checkpoint-safe values."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        "torch": torch.get_rng_state(),
        "numpy": {
            "kind": str(kind),
            "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached": float(cached),
        },
        "python": random.getstate(),
    }


def set_rng_state(state: dict[str, Any]) -> None:
    """Inverse of :func:`rng_state`."""
    torch.set_rng_state(state["torch"])
    npst = state["numpy"]
    np.random.set_state(
        (
            npst["kind"],
            npst["keys"].numpy().astype(np.uint32),
            npst["pos"],
            npst["has_gauss"],
            npst["cached"],
        )
    )
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
