"""Atomic, pickle-free training checkpoints.

A checkpoint is a plain ``dict`` of tensors, numbers, strings, lists, tuples and dicts written
with ``torch.save`` to a temporary file in the same directory, fsync'ed and renamed over the
target (so a crash never leaves a half-written checkpoint). It is read back with
``torch.load(weights_only=True)``: no arbitrary object is ever unpickled.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from seqrec.atomic import atomic_write
from seqrec.errors import ConfigError, DataError


def save_checkpoint(path: str | Path, payload: dict[str, Any]) -> Path:
    """Write ``payload`` to ``path`` atomically (temp file, fsync, rename, fsync dir)."""
    return atomic_write(path, lambda fh: torch.save(payload, fh))


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint` (``weights_only=True``)."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"no checkpoint at {path}")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # corrupt file or a disallowed type inside
        msg = " ".join(str(exc).split())[:200]  # torch's messages span lines: keep one
        raise DataError(
            f"cannot read checkpoint {path} ({type(exc).__name__}: {msg}); delete it "
            "or start the run over (seqrec train --fresh)"
        ) from None


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


def claim_run_dir(directory: Path, cfg: Any, name: str, n_items: int) -> None:
    """A checkpoint directory belongs to one (model, config, catalogue): write its
    ``run.json``, or refuse one that holds another run. Budget and placement fields may differ
    (:func:`seqrec.identity.same_run`, training only)."""
    import json

    from seqrec.config_fields import config_to_dict
    from seqrec.identity import differences

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    meta = {"model": name, "config": config_to_dict(cfg), "n_items": int(n_items)}
    path = directory / "run.json"

    def as_identity(m: dict) -> dict:
        return {
            "model": m.get("model"),
            "model_config": m.get("config", {}),
            "n_items": m.get("n_items"),
        }

    if path.exists():
        old = json.loads(path.read_text())
        changed = differences(as_identity(old), as_identity(meta), type(cfg), training_only=True)
        if changed:
            raise ConfigError(
                f"{directory} holds a run with another model/config/data (differs in "
                f"{', '.join(changed)}); use a new directory"
            )
    path.write_text(json.dumps(meta, indent=2))
