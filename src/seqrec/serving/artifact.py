"""Saving and loading fitted recommenders without pickle, and refusing damaged ones.

An artifact is a directory with ``model.json`` (model name, config, catalogue size, format
version and the sha256 + size of every other file), ``state.npz`` (NumPy arrays only, loaded
with ``allow_pickle=False``) and, when the model has one, ``vocab.npz`` (raw item ids, titles,
categories and the raw ids that preprocessing removed, as text packed by
:mod:`seqrec.serving.text_arrays`) and, for models trained by ``seqrec train``, ``users.npz`` (the
training users' histories, :mod:`seqrec.serving.histories`). A save writes a hidden sibling
directory and moves it into place, so an interrupted save leaves the previous artifact or none;
it refuses to replace another model's artifact, or a directory holding other files.

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
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from seqrec.atomic import atomic_write
from seqrec.errors import ConfigError, DataError, SeqRecError
from seqrec.serving import text_arrays

log = logging.getLogger(__name__)

#: 3: text columns packed as UTF-8 bytes + offsets (``text_arrays``); 2: NumPy fixed-width text
FORMAT_VERSION = 3
#: format 1 (no checksums) is still read, with a warning
READABLE_FORMATS = (1, 2, 3)
META = "model.json"
STATE = "state.npz"
VOCAB = "vocab.npz"
USERS = "users.npz"
#: the optional approximate item index (``seqrec index``, :mod:`seqrec.models.ann`)
INDEX = "index.npz"
#: every key ``model.json`` may hold; any other key is refused (an edit or another tool's file)
META_KEYS = ("format", "model", "config", "n_items", "files", "inputs", "version")
#: keys ``model.json`` may leave out: ``version`` (1 when absent) counts the updates of an
#: artifact (``seqrec update``, :mod:`seqrec.serving.versions`)
OPTIONAL_META_KEYS = ("version",)
#: what a history must carry to be scored (format 3 on): items, and timestamps for a model
#: trained with real times (``Recommender.reads_time``)
INPUTS = (["items"], ["items", "timestamps"])
#: the largest model.json read (a real one is a few kB; a huge file is not an artifact)
MAX_META_BYTES = 1 << 20


def save_recommender(model: Any, path: Path, overwrite: bool = False) -> Path:
    """Write the artifact into a hidden sibling directory, then move it into place: a failure
    at any point (a full disk, an id too large, Ctrl-C) leaves the previous artifact at
    ``path`` as it was, or no directory, never half of one.

    Raises:
        ConfigError: ``path`` holds files that are not an artifact's (they would be lost), or
            another model's artifact and ``overwrite`` is off.
    """
    model._check_fitted()
    path = Path(path)
    _check_replaceable(path, model.name, overwrite)
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.parent / f".{path.name}.saving-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        _write_artifact(model, staging)
        _move_into_place(staging, path)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return path


#: removed raw ids longer than this are not kept: they only let ``recommend`` say "removed"
#: instead of "never seen", and one pathological id (a whole file read as one field) would
#: otherwise be carried by every save
MAX_REMOVED_ID_CHARS = 1000
ARTIFACT_FILES = (META, STATE, VOCAB, USERS, INDEX)


def _check_replaceable(path: Path, name: str, overwrite: bool) -> None:
    if not path.exists():
        return
    if not path.is_dir():
        raise ConfigError(f"{path} is a file, not an artifact directory")
    foreign = sorted(p.name for p in path.iterdir() if p.name not in ARTIFACT_FILES)
    if foreign:
        raise ConfigError(
            f"{path} holds files that are not part of a seqrec artifact "
            f"({', '.join(foreign[:5])}{' ...' if len(foreign) > 5 else ''}): "
            "save to another directory"
        )
    if (path / META).is_file() and not overwrite:
        try:
            old = json.loads((path / META).read_text()).get("model")
        except (OSError, ValueError, AttributeError):
            old = None  # a damaged artifact is replaced: nothing usable is lost
        if old is not None and old != name:
            raise ConfigError(
                f"{path} holds a saved {old} model; saving this {name} model there "
                "would replace it: choose another path or pass overwrite=True"
            )


def _move_into_place(staging: Path, path: Path) -> None:
    if path.exists():
        old = path.parent / f".{path.name}.replaced-{os.getpid()}"
        shutil.rmtree(old, ignore_errors=True)
        os.replace(path, old)
        try:
            os.replace(staging, path)
        except BaseException:
            os.replace(old, path)  # put the previous artifact back
            raise
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(staging, path)


def _write_artifact(model: Any, path: Path) -> None:
    from seqrec.config_fields import config_to_dict

    files: dict[str, dict[str, Any]] = {}
    state = dict(model._state())
    state["__popularity__"] = np.asarray(model.popularity, dtype=np.float32)
    write_npz(path, STATE, state, files)
    if model.vocab is not None:
        raw = np.asarray(model.vocab.raw)
        vocab = {**text_arrays.pack("raw", raw.tolist()), "raw_kind": np.array(raw.dtype.kind)}
        for key in ("titles", "categories"):
            if getattr(model.vocab, key, None) is not None:
                vocab |= text_arrays.pack(key, getattr(model.vocab, key))
        if model.vocab.removed is not None:
            removed = [r for r in map(str, model.vocab.removed) if len(r) <= MAX_REMOVED_ID_CHARS]
            vocab |= text_arrays.pack("removed", removed)
        write_npz(path, VOCAB, vocab, files)
    if getattr(model, "user_histories", None) is not None:
        write_npz(path, USERS, model.user_histories.to_arrays(), files)
    if getattr(model, "index", None) is not None:  # bound to the weights just written
        write_npz(path, INDEX, model.index.to_arrays(files[STATE]["sha256"]), files)
    meta = {
        "format": FORMAT_VERSION,
        "model": model.name,
        "config": config_to_dict(model.settings),
        "n_items": int(model.n_items),
        "files": files,
        "inputs": ["items", "timestamps"] if getattr(model, "reads_time", False) else ["items"],
    }
    if getattr(model, "artifact_version", 1) > 1:
        meta["version"] = int(model.artifact_version)
    atomic_write(path / META, lambda fh: fh.write(json.dumps(meta, indent=2).encode()))


def write_npz(
    directory: Path, name: str, arrays: dict[str, np.ndarray], files: dict[str, dict[str, Any]]
) -> None:
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
    from seqrec.registry import get_model, settings_class

    path = artifact_dir(path)
    meta = read_meta(path)
    meta_path = path / META
    try:
        _, model_cls = get_model(meta["model"])
        config_cls = settings_class(meta["model"])
    except SeqRecError as exc:
        raise DataError(f"{meta_path}: {exc}") from None
    config = _config(config_cls, meta["config"], meta_path)
    n_items = meta["n_items"]
    if meta["format"] == 1:
        log.warning(
            "%s has no checksums (format 1): damage to its files cannot be detected; "
            "save the model again to add them",
            meta_path,
        )
        files = {name: None for name in (STATE, VOCAB, USERS) if (path / name).exists()}
    else:
        files = meta["files"]
    for name, record in files.items():
        verify_file(path / name, record)
    if STATE not in files:
        raise DataError(f"{meta_path}: no {STATE} recorded; the artifact is incomplete")
    for name in (VOCAB, USERS, INDEX):
        if name not in files and (path / name).exists():
            raise DataError(f"{path / name} is not recorded in {META}: it belongs to another save")
    state = read_npz(path / STATE)
    popularity = state.pop("__popularity__", None)
    if popularity is None or popularity.shape != (n_items + 1,):
        raise DataError(
            f"{path / STATE}: popularity array missing or not of length n_items + 1 "
            f"= {n_items + 1} (model.json says n_items = {n_items})"
        )
    try:
        model = model_cls(config)
    except SeqRecError as exc:
        raise DataError(f"{meta_path}: {exc}") from None
    model.n_items = n_items
    model.popularity = popularity.astype(np.float32, copy=False)
    # formats 1-2 did not record it: such an artifact scores as it did (positions alone)
    model.reads_time = "timestamps" in meta.get("inputs", ["items"])
    model.artifact_version = meta.get("version", 1)
    if VOCAB in files:
        model.vocab = _vocab(path / VOCAB, n_items)
    if USERS in files:
        from seqrec.serving.histories import UserHistories

        model.user_histories = UserHistories.from_arrays(read_npz(path / USERS), str(path / USERS))
    _fit_weights(model, state, path)
    if INDEX in files:
        model.index = _item_index(path, files, n_items)
    return model


_warned_no_library: set[str] = set()


def _item_index(path: Path, files: dict[str, Any], n_items: int) -> Any:
    """The artifact's item index; ``None`` (said once per artifact) without the library."""
    from seqrec.models import ann

    where = str(path / INDEX)
    arrays = read_npz(path / INDEX)
    meta = ann.index_meta(arrays, where)
    if meta["state_sha256"] != files[STATE]["sha256"]:
        raise DataError(
            f"{where} was built from other weights than {path / STATE}: rebuild it (seqrec index)"
        )
    if meta["n_items"] != n_items:
        raise DataError(f"{where} indexes {meta['n_items']} items, the model has {n_items}")
    if ann.faiss_module() is None:
        if where not in _warned_no_library:
            _warned_no_library.add(where)
            log.warning(
                "%s has an item index but faiss is not installed (%s): ranking exactly",
                path,
                ann.INSTALL_HINT,
            )
        return None
    return ann.load_index(arrays, meta, where)


def read_meta(path: Path) -> dict[str, Any]:
    """The validated content of ``path/model.json``."""
    meta_path = path / META
    if not path.exists():
        raise DataError(
            f"{path} does not exist: pass the run directory `seqrec train` printed "
            "(seqrec runs lists them)"
        )
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
        raise DataError(
            f"{meta_path} is not valid JSON (cut or edited?): {exc.msg} at line "
            f"{exc.lineno} column {exc.colno}"
        ) from None
    except RecursionError:
        raise DataError(f"{meta_path} is nested too deeply to be a seqrec {META}") from None
    if not isinstance(meta, dict):
        raise DataError(f"{meta_path} must hold a JSON object, got {type(meta).__name__}")
    fmt = meta.get("format")
    if type(fmt) is not int or fmt not in READABLE_FORMATS:
        raise DataError(
            f"{meta_path}: unsupported artifact format {fmt!r} "
            f"(this seqrec reads {', '.join(map(str, READABLE_FORMATS))})"
        )
    allowed = tuple(
        k for k in META_KEYS if (k != "files" or fmt >= 2) and (k != "inputs" or fmt >= 3)
    )
    unknown = sorted(set(meta) - set(allowed))
    if unknown:
        raise DataError(
            f"{meta_path}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(allowed)}"
        )
    missing = [k for k in allowed if k not in meta and k not in OPTIONAL_META_KEYS]
    if missing:
        raise DataError(f"{meta_path}: missing key(s) {', '.join(missing)}")
    if not isinstance(meta["model"], str):
        raise DataError(f"{meta_path}: 'model' must be a model name, got {meta['model']!r}")
    if not isinstance(meta["config"], dict):
        raise DataError(f"{meta_path}: 'config' must be an object, got {_short(meta['config'])}")
    n_items = meta["n_items"]
    if type(n_items) is not int or not 1 <= n_items < 2**31:
        raise DataError(f"{meta_path}: 'n_items' must be an integer >= 1, got {_short(n_items)}")
    version = meta.get("version", 1)
    if type(version) is not int or version < 1:
        raise DataError(f"{meta_path}: 'version' must be an integer >= 1, got {_short(version)}")
    if fmt >= 2:
        _check_files(meta["files"], meta_path)
    if fmt >= 3 and meta["inputs"] not in INPUTS:
        raise DataError(
            f"{meta_path}: 'inputs' must be one of {INPUTS}, got {_short(meta['inputs'])}"
        )
    return meta


def _check_files(files: Any, meta_path: Path) -> None:
    if not isinstance(files, dict):
        raise DataError(f"{meta_path}: 'files' must be an object, got {_short(files)}")
    for name, record in files.items():
        if not isinstance(name, str) or Path(name).name != name or name in ("", ".", "..", META):
            raise DataError(
                f"{meta_path}: 'files' may name only files of the artifact directory, got {name!r}"
            )
        ok = (
            isinstance(record, dict)
            and set(record) == {"sha256", "bytes"}
            and isinstance(record["sha256"], str)
            and len(record["sha256"]) == 64
            and type(record["bytes"]) is int
            and record["bytes"] >= 0
        )
        if not ok:
            raise DataError(
                f"{meta_path}: files[{name!r}] must be "
                f'{{"sha256": 64 hex digits, "bytes": size}}, got {_short(record)}'
            )


def verify_file(path: Path, record: dict[str, Any] | None) -> None:
    """Raise ``DataError`` unless ``path`` exists with the recorded size and sha256."""
    if not path.is_file():
        raise DataError(f"{path} is missing (recorded in {META})")
    if record is None:
        return
    size = path.stat().st_size
    if size != record["bytes"]:
        raise DataError(
            f"{path} has {size} bytes, {META} recorded {record['bytes']}: the file "
            "is truncated or was replaced"
        )
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != record["sha256"].lower():
        raise DataError(
            f"{path} does not match its sha256 in {META}: the file is damaged or was replaced"
        )


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
        raise DataError(
            f"{path} is not a readable .npz file ({type(exc).__name__}: {msg})"
        ) from None


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
    columns = {
        key: _text_column(arrays, key, path) for key in ("raw", "titles", "categories", "removed")
    }
    raw, kind = columns["raw"], arrays.get("raw_kind")
    if raw is None or kind is None or raw.shape != (n_items,):
        raise DataError(
            f"{path}: expected {n_items} raw item ids as text (model.json says n_items = {n_items})"
        )
    if str(kind) in ("i", "u"):
        try:
            raw = raw.astype(np.int64)
        except (ValueError, OverflowError):
            raise DataError(f"{path}: raw item ids are marked as integers but are not") from None
    for key in ("titles", "categories"):
        if columns[key] is not None and columns[key].shape != (n_items,):
            raise DataError(f"{path}: expected {n_items} {key} as text")
    removed = columns["removed"]
    if removed is not None and removed.ndim != 1:
        raise DataError(f"{path}: expected the removed item ids as text")
    return ItemVocab(
        raw, removed=removed, titles=columns["titles"], categories=columns["categories"]
    )


def _text_column(arrays: dict[str, np.ndarray], key: str, path: Path) -> np.ndarray | None:
    """A text column in either layout: packed (format 3) or NumPy text (formats 1-2)."""
    if text_arrays.has(arrays, key):
        return text_arrays.unpack(arrays, key, str(path))
    values = arrays.get(key)
    if values is not None and values.dtype.kind != "U":
        raise DataError(f"{path}: expected the {key} column as text, got {values.dtype}")
    return values


def _fit_weights(model: Any, state: dict[str, np.ndarray], path: Path) -> None:
    """Load the weights into the model built from the config and score one history; a
    mismatch means the config in model.json is not the one the weights were trained with."""
    from seqrec.data.sequences import Sequences

    def mismatch(exc: BaseException) -> DataError:
        msg = " ".join(str(exc).split())[:200]
        return DataError(
            f"{path / META}: the config does not match the weights in "
            f"{path / STATE} (edited after saving?): {msg}"
        )

    try:
        model._load_state(state)
    except SeqRecError:
        raise
    except Exception as exc:  # missing array (KeyError), shape mismatch (RuntimeError), ...
        raise mismatch(exc) from None
    try:
        probe = Sequences.from_lists([[1]], n_items=model.n_items, timestamps=[[0]])
        scores = model.score(probe)
    except Exception as exc:
        raise mismatch(exc) from None
    if scores.shape != (1, model.n_items + 1):
        raise mismatch(
            ValueError(
                f"one history scored to shape {scores.shape}, expected (1, {model.n_items + 1})"
            )
        )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
