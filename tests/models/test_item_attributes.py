"""The attribute item table (``model.item_attributes = "ids+attributes"``): a cold item (with
attributes, no interactions) gets a finite score that depends on its attributes; the ID-only
configuration builds and trains exactly as before; artifacts and growth carry the attribute
vocabulary."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch

from seqrec.data.attributes import ItemAttributes
from seqrec.data.sequences import Sequences
from seqrec.data.splits import item_cold_split
from seqrec.errors import ConfigError, DataError
from seqrec.models.hstu import HSTU
from seqrec.models.item_attributes import AttributeItemEmbedding
from seqrec.models.neural_config import settings
from seqrec.models.sasrec import SASRec
from seqrec.registry import get_model
from seqrec.serving.artifact import load_recommender
from seqrec.testing.conformance import TINY, ConformanceSuite
from seqrec.testing.synthetic import markov_sequences

ATTR = {"item_attributes": "ids+attributes"}
MODELS = {"sasrec": SASRec, "hstu": HSTU}


def _seqs(n_items: int = 24) -> Sequences:
    """Markov sequences whose items carry a category ``(i - 1) % 4 + 1`` and a brand
    ``(i - 1) % 3 + 1``."""
    seqs = markov_sequences(n_users=40, n_items=n_items, min_len=5, max_len=14, seed=2)
    ids = np.arange(1, n_items + 1, dtype=np.int64)
    attrs = ItemAttributes(
        np.repeat(ids, 2),
        np.stack([(ids - 1) % 4 + 1, (ids - 1) % 3 + 1], 1).ravel(),
        np.tile(["category", "brand"], n_items),
        np.tile([0, 1], n_items),
    )
    vocab = dataclasses.replace(seqs.vocab, attributes=attrs)
    return Sequences(
        seqs.offsets, seqs.items, seqs.n_items, seqs.timestamps, seqs.users, vocab, seqs.has_time
    )


def _fit(name: str, split, **over):
    model_cls = MODELS[name]
    cfg = settings(model_cls.config_cls, **{**TINY, "dim": 16, "epochs": 2, **over})
    return model_cls(cfg).fit(split.train, split.valid, progress=False)


@pytest.fixture(scope="module")
def cold_split():
    return item_cold_split(_seqs(), share=0.2, seed=0)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_cold_item_gets_a_finite_score_from_its_attributes(name, cold_split):
    model = _fit(name, cold_split, **ATTR)
    emb = model.encoder.item_emb
    assert isinstance(emb, AttributeItemEmbedding)
    cold = cold_split.cold_items
    assert len(cold) >= 2 and not emb.known[torch.from_numpy(cold)].any()
    hist = cold_split.test.histories()
    scores = model.score(hist)
    assert np.isfinite(scores[:, cold]).all()
    # its ID row is not used: its score comes from the default vector and its attributes
    with torch.no_grad():
        emb.id.weight[torch.from_numpy(cold)] += 5.0
    np.testing.assert_allclose(model.score(hist)[:, cold], scores[:, cold], rtol=1e-5, atol=1e-5)
    # ... so new attributes give it another score, and another item's attributes its score
    item, donor = int(cold[0]), int(cold[1])
    with torch.no_grad():
        emb.tokens[item] = emb.tokens[donor]
    changed = model.score(hist)
    np.testing.assert_allclose(changed[:, item], changed[:, donor], rtol=1e-5, atol=1e-5)
    assert not np.allclose(changed[:, item], scores[:, item])
    with torch.no_grad():
        emb.tokens[item] = 0  # no attributes at all: still a finite score
    assert np.isfinite(model.score(hist)[:, item]).all()


def test_an_item_without_training_rows_is_not_known_and_dropout_trains_the_default(cold_split):
    model = _fit("sasrec", cold_split, **ATTR)
    emb = model.encoder.item_emb
    counts = cold_split.train.item_counts()
    np.testing.assert_array_equal(emb.known.numpy()[1:], counts[1:] > 0)
    assert emb.default.abs().sum() > 0  # the default vector trained (it starts at zero)
    assert emb.weight[0].abs().sum() == 0  # PAD stays zero


@pytest.mark.parametrize("name", sorted(MODELS))
def test_id_only_configuration_builds_and_trains_as_before(name, cold_split):
    model_cls = MODELS[name]
    cfg = settings(model_cls.config_cls, **{**TINY, "dim": 16, "epochs": 1})
    model = model_cls(cfg)
    torch.manual_seed(0)
    built = model._new_encoder(25)
    torch.manual_seed(0)
    plain = model_cls.encoder_cls(model.config, 25)
    assert isinstance(built.item_emb, torch.nn.Embedding)
    a, b = built.state_dict(), plain.state_dict()
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=0)
    # id_dropout cannot act without attributes: a fit with another value is the same fit
    hist = cold_split.test.histories()
    one = _fit(name, cold_split, epochs=1).score(hist)
    other = _fit(name, cold_split, epochs=1, id_dropout=0.9).score(hist)
    np.testing.assert_array_equal(one, other)
    # and the attribute table changes the fit (the comparison above can fail)
    assert not np.allclose(one, _fit(name, cold_split, epochs=1, **ATTR).score(hist))


def test_attributes_travel_in_the_artifact(cold_split):
    model = _fit("sasrec", cold_split, **ATTR)
    hist = cold_split.test.histories()
    with tempfile.TemporaryDirectory() as tmp:
        model.save(Path(tmp) / "m")
        again = load_recommender(Path(tmp) / "m")
    emb = again.encoder.item_emb
    assert isinstance(emb, AttributeItemEmbedding)
    assert emb.spec().kinds == ["brand", "category"]
    np.testing.assert_array_equal(emb.tokens.numpy(), model.encoder.item_emb.tokens.numpy())
    np.testing.assert_allclose(again.score(hist), model.score(hist), rtol=1e-6, atol=1e-6)


def test_grown_items_are_scored_from_their_attributes(cold_split):
    model = _fit("sasrec", cold_split, **ATTR)
    hist = cold_split.test.histories()
    before = model.score(hist)
    old_n = model.n_items
    # new1 is a category-2 / brand-1 item, new2 the same, new3 carries a value never seen;
    # i1's entry is not used (a known item keeps the attributes it trained with)
    vocab = model.vocab.extend(
        ["new1", "i1", "new2", "new3"],
        attributes={
            "new1": [("category", 2), ("brand", 1)],
            "new2": [("category", 2), ("brand", 1)],
            "new3": [("category", 99)],
            "i1": [("category", 3)],
        },
    )
    assert len(vocab.attributes) == len(model.vocab.attributes) + 5
    model.grow(vocab)
    after = model.score(hist)
    np.testing.assert_allclose(after[:, : old_n + 1], before, rtol=1e-5, atol=1e-5)
    new = after[:, old_n + 1 :]
    assert np.isfinite(new).all()
    np.testing.assert_allclose(new[:, 0], new[:, 1], rtol=1e-5, atol=1e-5)  # same attributes
    assert not np.allclose(new[:, 0], new[:, 2])  # the unseen value is left out: none left
    emb = model.encoder.item_emb
    assert not emb.known[old_n + 1 :].any() and emb.tokens[old_n + 3].eq(0).all()
    with tempfile.TemporaryDirectory() as tmp:
        model.save(Path(tmp) / "m")
        again = load_recommender(Path(tmp) / "m")
    np.testing.assert_allclose(again.score(hist), after, rtol=1e-6, atol=1e-6)


def test_data_without_attributes_is_refused(cold_split):
    plain = markov_sequences(n_users=20, n_items=12, min_len=5, max_len=10, seed=0)
    bare = Sequences(
        plain.offsets,
        plain.items,
        plain.n_items,
        plain.timestamps,
        plain.users,
        dataclasses.replace(plain.vocab, attributes=None),
        plain.has_time,
    )
    split = item_cold_split(bare, 0.2, 0)
    with pytest.raises(DataError, match="item_attributes"):
        _fit("sasrec", split, **ATTR)


@pytest.mark.parametrize("name", ["gru4rec", "caser", "bert4rec", "lrurec"])
def test_models_without_a_shared_item_table_refuse(name, cold_split):
    config_cls, model_cls = get_model(name)
    cfg = settings(config_cls, **{**TINY, "epochs": 1, **ATTR})
    with pytest.raises(ConfigError, match="item_attributes"):
        model_cls(cfg).fit(cold_split.train, cold_split.valid, progress=False)


def test_bad_settings_are_refused():
    with pytest.raises(ConfigError, match="item_attributes"):
        settings(SASRec.config_cls, item_attributes="attributes")
    with pytest.raises(ConfigError, match="id_dropout"):
        settings(SASRec.config_cls, id_dropout=1.5)


class TestSASRecAttributesConformance(ConformanceSuite):
    model_cls = SASRec
    config_kwargs = {"dim": 16, "n_heads": 2, "positions": "from_start", **ATTR}
    learn_epochs = 15


class TestHSTUAttributesConformance(ConformanceSuite):
    model_cls = HSTU
    config_kwargs = {"dim": 16, "n_heads": 2, "positions": "from_start", **ATTR}
    learn_epochs = 15


SUPPORTED = {"sasrec", "hstu", "fmlprec", "bsarec", "tvrec", "narm", "mf"}


@pytest.mark.parametrize("name", sorted(SUPPORTED))
def test_every_model_with_one_item_table_scores_cold_items(name, cold_split):
    config_cls, model_cls = get_model(name)
    over = {"dim": 16} if "dim" in config_cls.__dataclass_fields__ else {}
    cfg = settings(config_cls, **{**TINY, "epochs": 1, **over, **ATTR})
    model = model_cls(cfg).fit(cold_split.train, cold_split.valid, progress=False)
    assert isinstance(model.encoder.item_emb, AttributeItemEmbedding)
    cold = cold_split.cold_items
    scores = model.score(cold_split.test.histories())
    assert np.isfinite(scores[:, cold]).all()
    with torch.no_grad():
        model.encoder.item_emb.tokens[int(cold[0])] = model.encoder.item_emb.tokens[int(cold[1])]
    changed = model.score(cold_split.test.histories())
    np.testing.assert_allclose(changed[:, cold[0]], changed[:, cold[1]], rtol=1e-5, atol=1e-5)


def test_fit_partial_trains_the_id_rows_of_the_new_items_it_shows(cold_split):
    model = _fit("sasrec", cold_split, **ATTR)
    old_n = model.n_items
    vocab = model.vocab.extend(["new1", "new2"], attributes={"new1": [("category", 2)]})
    rows = [[1, old_n + 1, 3, 4], [2, 3, old_n + 1, 5]]  # new1 occurs, new2 does not
    data = Sequences.from_lists(rows, n_items=len(vocab), users=np.arange(2), vocab=vocab)
    model.fit_partial(data, epochs=1, progress=False)
    known = model.encoder.item_emb.known
    assert bool(known[old_n + 1]) and not bool(known[old_n + 2]) and not bool(known[0])
    assert np.isfinite(model.score(cold_split.test.histories())[:, 1:]).all()


@pytest.mark.parametrize("name", sorted(SUPPORTED))
def test_one_id_dropout_draw_per_training_step(name, cold_split, monkeypatch):
    """The item read in a history and the item scored share one ID-dropout draw per step,
    however many times the encoder looks items up (TV-Rec runs its batch in length groups)."""
    draws, steps = [0], [0]
    known = AttributeItemEmbedding._known

    def counting(self, draw):
        if draw and self.training:
            draws[0] += 1
        return known(self, draw)

    monkeypatch.setattr(AttributeItemEmbedding, "_known", counting)
    config_cls, model_cls = get_model(name)
    over = {"dim": 16} if "dim" in config_cls.__dataclass_fields__ else {}
    cfg = settings(config_cls, **{**TINY, "epochs": 1, "batch_size": 16, **over, **ATTR})
    model = model_cls(cfg)
    step = model.compute_loss

    def counted_step(data):
        steps[0] += 1
        return step(data)

    model.compute_loss = counted_step
    model.fit(cold_split.train, cold_split.valid, progress=False)
    assert steps[0] > 1
    assert draws[0] == steps[0]
