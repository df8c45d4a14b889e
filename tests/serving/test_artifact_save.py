"""Saving an artifact is all or nothing, never replaces another model's artifact or a user's
files, and stores text columns at the size of their text (one huge id used to ask NumPy for
tens of GiB)."""

import hashlib
import json

import numpy as np
import pytest

from seqrec.data.sequences import Sequences
from seqrec.data.vocab import ItemVocab
from seqrec.errors import ConfigError
from seqrec.models.base import Recommender
from seqrec.models.factorization.pop import Pop, PopConfig
from seqrec.models.factorization.svd import PureSVD, PureSVDConfig
from seqrec.serving import artifact


def _pop(raw=None, removed=None):
    raw = np.array(["a", "b", "c", "d"], dtype=object) if raw is None else raw
    vocab = ItemVocab(raw, removed=removed)
    train = Sequences.from_lists([[1, 2, 2, 2], [2, 3, 4], [2, 4]], n_items=len(raw), vocab=vocab)
    return Pop(PopConfig()).fit(train)


def test_another_models_artifact_is_not_replaced_without_overwrite(tmp_path):
    train = Sequences.from_lists([[1, 2, 3], [2, 3, 4], [1, 4]], n_items=4)
    PureSVD(PureSVDConfig(rank=2)).fit(train).save(tmp_path / "m")
    with pytest.raises(ConfigError, match="holds a saved puresvd model"):
        _pop().save(tmp_path / "m")
    assert Recommender.load(tmp_path / "m").name == "puresvd"  # untouched
    _pop().save(tmp_path / "m", overwrite=True)
    assert Recommender.load(tmp_path / "m").name == "pop"
    _pop().save(tmp_path / "m")  # the same model again: a re-save
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]  # no staging directories left


def test_a_directory_with_other_files_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="notes.txt"):
        _pop().save(tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_a_failed_save_leaves_the_previous_artifact(tmp_path, monkeypatch):
    _pop().save(tmp_path / "m")
    before = {p.name: p.read_bytes() for p in (tmp_path / "m").iterdir()}
    calls = []

    def broken(directory, name, arrays, files):
        calls.append(name)
        if len(calls) == 2:  # state.npz written, vocab.npz fails (a full disk, Ctrl-C)
            raise OSError("No space left on device")
        return real(directory, name, arrays, files)

    real = artifact.write_npz
    monkeypatch.setattr(artifact, "write_npz", broken)
    with pytest.raises(OSError, match="No space"):
        _pop().save(tmp_path / "m")
    assert {p.name: p.read_bytes() for p in (tmp_path / "m").iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]
    monkeypatch.undo()
    with pytest.raises(OSError):  # a first save that fails leaves nothing
        monkeypatch.setattr(artifact, "write_npz", broken)
        calls.clear()
        _pop().save(tmp_path / "new")
    assert not (tmp_path / "new").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["m"]


def test_one_huge_id_costs_its_own_size(tmp_path):
    """20,000 items with one 2,000,000-character id: NumPy's fixed-width text would be 160 GB."""
    raw = np.array([f"item{i}" for i in range(20_000)], dtype=object)
    raw[7] = "x" * 2_000_000
    removed = np.array(["y" * 5_000_000, "gone"], dtype=object)  # a removed one is not kept at all
    _pop(raw, removed).save(tmp_path / "m")
    size = sum(p.stat().st_size for p in (tmp_path / "m").iterdir())
    assert size < 3_000_000
    vocab = Recommender.load(tmp_path / "m").vocab
    assert vocab.decode(np.array([8]))[0] == raw[7] and vocab.encode(["item9"])[0] == 10
    assert vocab.is_removed("gone") and not vocab.is_removed("y" * 5_000_000)


def _rewrite_as_format_2(path):
    """The vocabulary of an artifact saved by the previous format: NumPy text columns."""
    import io

    with np.load(path / "vocab.npz", allow_pickle=False) as npz:
        arrays = dict(npz)
    old = {"raw_kind": arrays.pop("raw_kind")}
    for key in ("raw", "titles", "categories", "removed"):
        if key + "__utf8" in arrays:
            data, offsets = arrays.pop(key + "__utf8").tobytes(), arrays.pop(key + "__offsets")
            old[key] = np.array(
                [data[a:b].decode() for a, b in zip(offsets[:-1], offsets[1:], strict=True)]
            )
    buf = io.BytesIO()
    np.savez(buf, **old)
    (path / "vocab.npz").write_bytes(buf.getvalue())
    meta = json.loads((path / "model.json").read_text())
    meta["format"] = 2
    del meta["inputs"]  # format 3 on
    meta["files"]["vocab.npz"] = {
        "sha256": hashlib.sha256(buf.getvalue()).hexdigest(),
        "bytes": len(buf.getvalue()),
    }
    (path / "model.json").write_text(json.dumps(meta))


def test_format_2_artifacts_still_load(tmp_path):
    raw = np.array([101, 102, 103, 104])
    _pop(raw, removed=np.array(["99"], dtype=object)).save(tmp_path / "m")
    _rewrite_as_format_2(tmp_path / "m")
    model = Recommender.load(tmp_path / "m")
    assert model.vocab.raw.tolist() == [101, 102, 103, 104] and model.vocab.is_removed(99)


def test_damaged_packed_text_is_one_line(tmp_path):
    import io

    from seqrec.errors import DataError

    _pop().save(tmp_path / "m")
    with np.load(tmp_path / "m" / "vocab.npz", allow_pickle=False) as npz:
        arrays = dict(npz)
    arrays["raw__offsets"] = arrays["raw__offsets"][::-1].copy()
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    (tmp_path / "m" / "vocab.npz").write_bytes(buf.getvalue())
    meta = json.loads((tmp_path / "m" / "model.json").read_text())
    meta["files"]["vocab.npz"] = {
        "sha256": hashlib.sha256(buf.getvalue()).hexdigest(),
        "bytes": len(buf.getvalue()),
    }
    (tmp_path / "m" / "model.json").write_text(json.dumps(meta))
    with pytest.raises(DataError, match="text column 'raw' is damaged"):
        Recommender.load(tmp_path / "m")
