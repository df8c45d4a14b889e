"""Numeric item vectors (an item file's ``vector`` column): parsed strictly, aligned to the
internal ids, and read by the attribute item table, so that a cold item with a vector and no
interactions is scored by it; artifacts and growth carry the vectors."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch

from seqrec.data.item_vectors import parse_vector, vectors_from_texts
from seqrec.data.sequences import Sequences
from seqrec.data.splits import item_cold_split
from seqrec.errors import DataError
from seqrec.models.neural_config import settings
from seqrec.models.sasrec import SASRec
from seqrec.serving.artifact import load_recommender
from seqrec.testing.conformance import TINY
from seqrec.testing.synthetic import markov_sequences


def test_vectors_parse_every_common_layout_and_refuse_the_rest():
    for text in ("0.5 -1 2e-1", "0.5,-1,0.2", "[0.5, -1, 0.2]", "(0.5;-1;0.2)"):
        np.testing.assert_allclose(parse_vector(text), [0.5, -1.0, 0.2], rtol=1e-6)
    assert parse_vector("") is None and parse_vector(None) is None and parse_vector("[]") is None
    with pytest.raises(DataError, match="'x' is not a number"):
        parse_vector("1 x 3")
    with pytest.raises(DataError, match="finite"):
        parse_vector("1 nan 3")
    table = vectors_from_texts(["1 2", "", "3 4"], ["a", "b", "c"])
    assert table.shape == (3, 2) and np.isnan(table[1]).all() and table[2].tolist() == [3, 4]
    assert vectors_from_texts(["", None], ["a", "b"]) is None
    with pytest.raises(DataError, match="item 'c' has 3 values, item 'a' 2"):
        vectors_from_texts(["1 2", "", "3 4 5"], ["a", "b", "c"])
    with pytest.raises(DataError, match="item 'b'"):
        vectors_from_texts(["1 2", "1 y"], ["a", "b"])


@pytest.mark.parametrize("layout", ["csv", "parquet"])
def test_an_item_file_vector_column_reaches_the_vocabulary_by_internal_id(tmp_path, layout):
    import polars as pl

    from seqrec.data.preprocess import PreprocessConfig, preprocess
    from seqrec.data.sources import load

    log = ["user,item,timestamp"] + [
        f"u{u},s{(u + t) % 5},{100 * u + t}" for u in range(6) for t in range(4)
    ]
    (tmp_path / "log.csv").write_text("\n".join(log) + "\n")
    vectors = {f"s{i}": [float(i), -float(i), 0.5] for i in range(5) if i != 3}  # s3: none
    frame = pl.DataFrame(
        {"item": list(vectors), "title": [f"t{k}" for k in vectors], "emb": list(vectors.values())}
    )
    if layout == "csv":
        frame = frame.with_columns(pl.col("emb").cast(pl.List(pl.String)).list.join(","))
        path = tmp_path / "items.csv"
        frame.write_csv(path)
    else:
        path = tmp_path / "items.parquet"
        frame.write_parquet(path)
    inter = load(str(tmp_path / "log.csv"), item_file=str(path), item_columns={"vector": "emb"})
    vocab = preprocess(inter, PreprocessConfig(filter="none")).vocab
    got = {str(r): vocab.vectors[i] for i, r in enumerate(vocab.raw.tolist())}
    assert np.isnan(got["s3"]).all()
    for key, v in vectors.items():
        np.testing.assert_allclose(got[key], v)


def _seqs_with_vectors(n_items: int = 24, width: int = 6) -> Sequences:
    """Markov sequences whose items carry a vector (no categories)."""
    seqs = markov_sequences(n_users=40, n_items=n_items, min_len=5, max_len=14, seed=3)
    rng = np.random.default_rng(0)
    vectors = (rng.normal(size=(n_items, width)) * 40.0).astype(np.float32)  # any units
    vocab = dataclasses.replace(seqs.vocab, attributes=None, vectors=vectors)
    return Sequences(
        seqs.offsets, seqs.items, seqs.n_items, seqs.timestamps, seqs.users, vocab, seqs.has_time
    )


@pytest.fixture(scope="module")
def vector_model():
    split = item_cold_split(_seqs_with_vectors(), share=0.2, seed=0)
    cfg = settings(
        SASRec.config_cls, **{**TINY, "dim": 16, "epochs": 2, "item_attributes": "ids+attributes"}
    )
    return SASRec(cfg).fit(split.train, split.valid, progress=False), split


def test_a_cold_item_is_scored_by_its_vector(vector_model):
    model, split = vector_model
    emb = model.encoder.item_emb
    assert emb.vec is not None and model.item_vector_width == 6
    # the table is scaled to unit root mean square over the training items' values
    known = emb.known.numpy()
    assert np.sqrt(np.mean(np.square(emb.vectors.numpy()[known]))) == pytest.approx(1.0, rel=0.1)
    cold = split.cold_items
    hist = split.test.histories()
    scores = model.score(hist)
    assert np.isfinite(scores[:, cold]).all()
    item, donor = int(cold[0]), int(cold[1])
    # two cold items differ only by their vectors (no ID part, no attributes) ...
    assert not np.allclose(scores[:, item], scores[:, donor], rtol=1e-4, atol=1e-4)
    with torch.no_grad():
        saved = emb.vectors[item].clone()
        emb.vectors[item] = emb.vectors[donor]
    changed = model.score(hist)  # ... so one's vector gives it the other's score
    np.testing.assert_allclose(changed[:, item], changed[:, donor], rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        emb.vectors[item] = saved
    np.testing.assert_allclose(model.score(hist), scores, rtol=1e-5, atol=1e-5)


def test_vectors_travel_in_the_artifact_and_grow_with_the_catalogue(vector_model):
    model, split = vector_model
    hist = split.test.histories()
    with tempfile.TemporaryDirectory() as tmp:
        model.save(Path(tmp) / "m")
        loaded = load_recommender(Path(tmp) / "m")
    np.testing.assert_allclose(loaded.score(hist), model.score(hist), rtol=1e-5, atol=1e-5)
    scale = float(loaded.encoder.item_emb.vector_scale)
    vocab = dataclasses.replace(loaded.vocab, vectors=split.train.vocab.vectors)
    twin = split.train.vocab.vectors[0] * 1.0
    grown = vocab.extend(["new1", "new2"], vectors={"new1": twin})
    loaded.grow(grown)
    emb = loaded.encoder.item_emb
    n = loaded.n_items
    np.testing.assert_allclose(emb.vectors[n - 1].numpy(), twin / scale, rtol=1e-6)
    assert not emb.vectors[n].any()  # new2 has no vector
    with pytest.raises(DataError, match="3 values, the vocabulary's have 6"):
        grown.extend(["new3"], vectors={"new3": np.ones(3)})
