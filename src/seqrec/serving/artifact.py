"""Saving and loading fitted recommenders without pickle.

An artifact is a directory with ``model.json`` (model name, config, catalogue size, format
version), ``state.npz`` (NumPy arrays only, loaded with ``allow_pickle=False``) and, when the
model has one, ``vocab.npz`` (raw item ids and titles, as strings).
"""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np

from seqrec.atomic import atomic_write
from seqrec.errors import DataError

FORMAT_VERSION = 1


def save_recommender(model: Any, path: Path) -> Path:
    from seqrec.models.base import config_to_dict

    model._check_fitted()
    path.mkdir(parents=True, exist_ok=True)
    meta = {
        "format": FORMAT_VERSION,
        "model": model.name,
        "config": config_to_dict(model.config),
        "n_items": int(model.n_items),
    }
    state = dict(model._state())
    state["__popularity__"] = np.asarray(model.popularity, dtype=np.float32)
    atomic_write(path / "state.npz", lambda fh: np.savez(fh, **state))
    if model.vocab is not None:
        vocab = {"raw": np.asarray(model.vocab.raw).astype(str)}
        vocab["raw_kind"] = np.array(np.asarray(model.vocab.raw).dtype.kind)
        if model.vocab.titles is not None:
            vocab["titles"] = np.asarray(model.vocab.titles).astype(str)
        atomic_write(path / "vocab.npz", lambda fh: np.savez(fh, **vocab))
    atomic_write(path / "model.json", lambda fh: fh.write(json.dumps(meta, indent=2).encode()))
    return path


def _build_config(config_cls: type, values: dict[str, Any]) -> Any:
    known = {f.name for f in fields(config_cls)}
    kwargs = {}
    for key, value in values.items():
        if key in known:
            kwargs[key] = tuple(value) if isinstance(value, list) else value
    return config_cls(**kwargs)


def load_recommender(path: Path) -> Any:
    from seqrec.data.preprocess import ItemVocab
    from seqrec.registry import get_model

    meta_path = path / "model.json"
    if not meta_path.exists():
        raise DataError(f"{path} is not a seqrec artifact (no model.json)")
    meta = json.loads(meta_path.read_text())
    if meta.get("format") != FORMAT_VERSION:
        raise DataError(f"unsupported artifact format {meta.get('format')!r}")
    config_cls, model_cls = get_model(meta["model"])
    model = model_cls(_build_config(config_cls, meta["config"]))
    with np.load(path / "state.npz", allow_pickle=False) as npz:
        state = {k: npz[k] for k in npz.files}
    model.n_items = int(meta["n_items"])
    model.popularity = state.pop("__popularity__")
    if (path / "vocab.npz").exists():
        with np.load(path / "vocab.npz", allow_pickle=False) as npz:
            raw = npz["raw"]
            if str(npz["raw_kind"]) in "iu":
                raw = raw.astype(np.int64)
            titles = npz["titles"] if "titles" in npz.files else None
        model.vocab = ItemVocab(raw, titles)
    model._load_state(state)
    return model
