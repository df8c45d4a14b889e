"""Saving and loading fitted recommenders without pickle, and refusing damaged ones.

An artifact is a directory with ``model.json`` (model name, config, catalogue size, format
version and the sha256 + size of every other file), ``state.npz`` (NumPy arrays only, loaded
with ``allow_pickle=False``) and, when the model has one, ``vocab.npz`` (raw item ids, titles,
categories and the raw ids that preprocessing removed, as strings) and, for models trained by
``seqrec train``, ``users.npz`` (the training users' histories,
:mod:`seqrec.serving.histories`). ``model.json`` is written last, so a directory whose save was interrupted
has no ``model.json`` (or the previous one, whose checksums then fail).

Loading checks, in order, and stops at the first problem with a one-line ``DataError`` that
names the file and what is wrong: ``model.json`` is readable JSON with exactly the known keys;
the model name is registered; the config has only fields of that model's config class, each of
its declared type; every recorded file exists with its recorded size and sha256 (so a truncated,
replaced or random file is caught before it is parsed); the arrays are there with the shapes
the catalogue size implies; the weights fit the config (a config edited after saving, e.g. a
different ``max_len``, is named as such); and one history scores to the right shape.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
from pathlib import Path
from typing import Any

import numpy as np

from seqrec.atomic import atomic_write
from seqrec.errors import DataError, SeqRecError

log = logging.getLogger(__name__)

FORMAT_VERSION = 2
#: format 1 (no checksums) is still read, with a warning
READABLE_FORMATS = (1, 2)
META = "model.json"
STATE = "state.npz"
VOCAB = "vocab.npz"
USERS = "users.npz"
#: every key ``model.json`` may hold; any other key is refused (an edit or another tool's file)
META_KEYS = ("format", "model", "config", "n_items", "files")
#: the largest model.json read (a real one is a few kB; a huge file is not an artifact)
MAX_META_BYTES = 1 << 20


def save_recommender(model: Any, path: Path) -> Path:
    from seqrec.config_fields import config_to_dict

    model._check_fitted()
    path.mkdir(parents=True, exist_ok=True)
    files: dict[str, dict[str, Any]] = {}
    state = dict(model._state())
    state["__popularity__"] = np.asarray(model.popularity, dtype=np.float32)
    write_npz(path, STATE, state, files)
    if model.vocab is not None:
        vocab = {"raw": np.asarray(model.vocab.raw).astype(str)}
        vocab["raw_kind"] = np.array(np.asarray(model.vocab.raw).dtype.kind)
        for key in ("titles", "categories", "removed"):
            if getattr(model.vocab, key, None) is not None:
                values = np.asarray(getattr(model.vocab, key), dtype=object)
                vocab[key] = np.where(values == None, "", values).astype(str)  # noqa: E711
        write_npz(path, VOCAB, vocab, files)
    elif (path / VOCAB).exists():  # a stale vocabulary of an earlier save must not pair up
        (path / VOCAB).unlink()
    if getattr(model, "user_histories", None) is not None:
        write_npz(path, USERS, model.user_histories.to_arrays(), files)
    elif (path / USERS).exists():  # the histories of an earlier save must not pair up
        (path / USERS).unlink()
    meta = {
        "format": FORMAT_VERSION,
        "model": model.name,
        "config": config_to_dict(model.config),
        "n_items": int(model.n_items),
        "files": files,
    }
    atomic_write(path / META, lambda fh: fh.write(json.dumps(meta, indent=2).encode()))
    return path


def write_npz(directory: Path, name: str, arrays: dict[str, np.ndarray],
              files: dict[str, dict[str, Any]]) -> None:
    """Write ``arrays`` to ``directory/name`` atomically and record its sha256 and size."""
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    data = buf.getvalue()
    atomic_write(directory / name, lambda fh: fh.write(data))
    files[name] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def artifact_dir(path: str | Path) -> Path:
    """``path`` itself, or ``path/model`` when ``path`` is a ``seqrec train`` run directory: the
    run directory is the one people remember, and ``seqrec train`` prints both; a file of an
    artifact (``model/model.json``) stands for its directory."""
    path = Path(path)
    if path.is_file() and (path.parent / META).is_file():  # a file of it (model.json, ...)
        return path.parent
    if not (path / META).is_file() and (path / "model" / META).is_file():
        return path / "model"
    return path


def load_recommender(path: Path) -> Any:
    from seqrec.registry import get_model

    path = artifact_dir(path)
    meta = read_meta(path)
    meta_path = path / META
    try:
        config_cls, model_cls = get_model(meta["model"])
    except SeqRecError as exc:
        raise DataError(f"{meta_path}: {exc}") from None
    config = _config(config_cls, meta["config"], meta_path)
    n_items = meta["n_items"]
    if meta["format"] == 1:
        log.warning("%s has no checksums (format 1): damage to its files cannot be detected; "
                    "save the model again to add them", meta_path)
        files = {name: None for name in (STATE, VOCAB, USERS) if (path / name).exists()}
    else:
        files = meta["files"]
    for name, record in files.items():
        verify_file(path / name, record)
    if STATE not in files:
        raise DataError(f"{meta_path}: no {STATE} recorded; the artifact is incomplete")
    for name in (VOCAB, USERS):
        if name not in files and (path / name).exists():
            raise DataError(f"{path / name} is not recorded in {META}: it belongs to another save")
    state = read_npz(path / STATE)
    popularity = state.pop("__popularity__", None)
    if popularity is None or popularity.shape != (n_items + 1,):
        raise DataError(f"{path / STATE}: popularity array missing or not of length n_items + 1 "
                        f"= {n_items + 1} (model.json says n_items = {n_items})")
    try:
        model = model_cls(config)
    except SeqRecError as exc:
        raise DataError(f"{meta_path}: {exc}") from None
    model.n_items = n_items
    model.popularity = popularity.astype(np.float32, copy=False)
    if VOCAB in files:
        model.vocab = _vocab(path / VOCAB, n_items)
    if USERS in files:
        from seqrec.serving.histories import UserHistories

        model.user_histories = UserHistories.from_arrays(read_npz(path / USERS), str(path / USERS))
    _fit_weights(model, state, path)
    return model


def read_meta(path: Path) -> dict[str, Any]:
    """The validated content of ``path/model.json``."""
    meta_path = path / META
    if not path.exists():
        raise DataError(f"{path} does not exist: pass the run directory `seqrec train` printed "
                        "(seqrec runs lists them)")
    if not path.is_dir() or not meta_path.is_file():
        raise DataError(f"{path} is not a seqrec artifact (no {META})")
    raw = meta_path.read_bytes()[: MAX_META_BYTES + 1]
    if not raw.strip():
        raise DataError(f"{meta_path} is empty: the save was interrupted or the file was cleared")
    if len(raw) > MAX_META_BYTES:
        raise DataError(f"{meta_path} is larger than {MAX_META_BYTES} bytes: not a seqrec {META}")
    try:
        meta = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise DataError(f"{meta_path} is not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{meta_path} is not valid JSON (cut or edited?): {exc.msg} at line "
                        f"{exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise DataError(f"{meta_path} is nested too deeply to be a seqrec {META}") from None
    if not isinstance(meta, dict):
        raise DataError(f"{meta_path} must hold a JSON object, got {type(meta).__name__}")
    fmt = meta.get("format")
    if type(fmt) is not int or fmt not in READABLE_FORMATS:
        raise DataError(f"{meta_path}: unsupported artifact format {fmt!r} "
                        f"(this seqrec reads {', '.join(map(str, READABLE_FORMATS))})")
    allowed = META_KEYS if fmt >= 2 else tuple(k for k in META_KEYS if k != "files")
    unknown = sorted(set(meta) - set(allowed))
    if unknown:
        raise DataError(f"{meta_path}: unknown key(s) {', '.join(unknown)}; allowed: "
                        f"{', '.join(allowed)}")
    missing = [k for k in allowed if k not in meta]
    if missing:
        raise DataError(f"{meta_path}: missing key(s) {', '.join(missing)}")
    if not isinstance(meta["model"], str):
        raise DataError(f"{meta_path}: 'model' must be a model name, got {meta['model']!r}")
    if not isinstance(meta["config"], dict):
        raise DataError(f"{meta_path}: 'config' must be an object, got {_short(meta['config'])}")
    n_items = meta["n_items"]
    if type(n_items) is not int or not 1 <= n_items < 2**31:
        raise DataError(f"{meta_path}: 'n_items' must be an integer >= 1, got {_short(n_items)}")
    if fmt >= 2:
        _check_files(meta["files"], meta_path)
    return meta


def _check_files(files: Any, meta_path: Path) -> None:
    if not isinstance(files, dict):
        raise DataError(f"{meta_path}: 'files' must be an object, got {_short(files)}")
    for name, record in files.items():
        if not isinstance(name, str) or Path(name).name != name or name in ("", ".", "..", META):
            raise DataError(f"{meta_path}: 'files' may name only files of the artifact "
                            f"directory, got {name!r}")
        ok = (isinstance(record, dict) and set(record) == {"sha256", "bytes"}
              and isinstance(record["sha256"], str) and len(record["sha256"]) == 64
              and type(record["bytes"]) is int and record["bytes"] >= 0)
        if not ok:
            raise DataError(f"{meta_path}: files[{name!r}] must be "
                            f'{{"sha256": 64 hex digits, "bytes": size}}, got {_short(record)}')


def verify_file(path: Path, record: dict[str, Any] | None) -> None:
    """Raise ``DataError`` unless ``path`` exists with the recorded size and sha256."""
    if not path.is_file():
        raise DataError(f"{path} is missing (recorded in {META})")
    if record is None:
        return
    size = path.stat().st_size
    if size != record["bytes"]:
        raise DataError(f"{path} has {size} bytes, {META} recorded {record['bytes']}: the file "
                        "is truncated or was replaced")
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != record["sha256"].lower():
        raise DataError(f"{path} does not match its sha256 in {META}: the file is damaged or "
                        "was replaced")


def read_npz(path: Path) -> dict[str, np.ndarray]:
    """Every array of an ``.npz`` (no pickle); any parse failure is a one-line DataError."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            if not hasattr(npz, "files"):
                raise ValueError("a single .npy array, not an .npz archive")
            return {k: npz[k] for k in npz.files}
    except SeqRecError:
        raise
    except Exception as exc:  # BadZipFile, zlib/EOF errors, pickled objects, bad headers
        msg = " ".join(str(exc).split())[:160]
        raise DataError(f"{path} is not a readable .npz file ({type(exc).__name__}: {msg})") from None


def _config(config_cls: type, values: dict[str, Any], meta_path: Path) -> Any:
    from seqrec.config import build_dataclass

    try:
        return build_dataclass(config_cls, values, f"the config of {meta_path}")
    except SeqRecError as exc:
        text = str(exc)
        raise DataError(text if str(meta_path) in text else f"{meta_path}: {text}") from None


def _vocab(path: Path, n_items: int) -> Any:
    from seqrec.data.vocab import ItemVocab

    arrays = read_npz(path)
    raw, kind = arrays.get("raw"), arrays.get("raw_kind")
    if raw is None or kind is None or raw.shape != (n_items,) or raw.dtype.kind != "U":
        raise DataError(f"{path}: expected {n_items} raw item ids as text (model.json says "
                        f"n_items = {n_items})")
    if str(kind) in ("i", "u"):
        try:
            raw = raw.astype(np.int64)
        except (ValueError, OverflowError):
            raise DataError(f"{path}: raw item ids are marked as integers but are not") from None
    extra = {}
    for key in ("titles", "categories"):
        values = arrays.get(key)
        if values is not None and (values.shape != (n_items,) or values.dtype.kind != "U"):
            raise DataError(f"{path}: expected {n_items} {key} as text")
        extra[key] = values
    removed = arrays.get("removed")
    if removed is not None and (removed.ndim != 1 or removed.dtype.kind != "U"):
        raise DataError(f"{path}: expected the removed item ids as text")
    return ItemVocab(raw, removed=removed, **extra)


def _fit_weights(model: Any, state: dict[str, np.ndarray], path: Path) -> None:
    """Load the weights into the model built from the config and score one history; a
    mismatch means the config in model.json is not the one the weights were trained with."""
    from seqrec.data.sequences import Sequences

    def mismatch(exc: BaseException) -> DataError:
        msg = " ".join(str(exc).split())[:200]
        return DataError(f"{path / META}: the config does not match the weights in "
                         f"{path / STATE} (edited after saving?): {msg}")

    try:
        model._load_state(state)
    except SeqRecError:
        raise
    except Exception as exc:  # missing array (KeyError), shape mismatch (RuntimeError), ...
        raise mismatch(exc) from None
    try:
        probe = Sequences.from_lists([[1]], n_items=model.n_items)
        scores = model.score(probe)
    except Exception as exc:
        raise mismatch(exc) from None
    if scores.shape != (1, model.n_items + 1):
        raise mismatch(ValueError(f"one history scored to shape {scores.shape}, expected "
                                  f"(1, {model.n_items + 1})"))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
