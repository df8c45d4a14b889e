"""Catalogue growth: new items (and users) appended to a fitted model keep every old item's
scores, for every registered model; ``fit_partial`` continues from the grown model."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import numpy as np
import pytest

from seqrec.data.sequences import Sequences
from seqrec.data.vocab import ItemVocab
from seqrec.errors import ConfigError, DataError
from seqrec.models.base import Recommender
from seqrec.models.neural_config import NeuralConfig, settings
from seqrec.registry import get_model, model_names
from seqrec.serving.artifact import load_recommender
from seqrec.testing.conformance import TINY
from seqrec.testing.synthetic import leave_last_out_small, markov_sequences

#: the smallest settings each model fits in well under a second on the synthetic data
SETTINGS = {
    "pop": {},
    "puresvd": {"rank": 4},
    "ga-satf": {
        "max_len": 5,
        "user_rank": 6,
        "item_rank": 5,
        "position_rank": 2,
        "max_iters": 2,
        "scaling": 0.4,
        "rescaled": True,
    },
    "la-satf": {
        "max_len": 6,
        "user_rank": 6,
        "item_rank": 4,
        "attention_window": 3,
        "attention_rank": 2,
        "sequences_rank": 2,
        "max_iters": 2,
        "scaling": 0.4,
        "rescaled": True,
    },
    "lsan": {"dim": 16, "n_heads": 2, "m1": 3, "categories": "category"},
    "bert4rec": {"dim": 16, "n_heads": 2},
    "hstu": {"dim": 16, "n_heads": 2},
    "sasrec": {"dim": 16, "n_heads": 2},
    "caser": {"dim": 16, "window": 4, "n_h": 4, "n_v": 2},
}
NEW_ITEMS = 4
NEW_USERS = 3


def _data():
    seqs = markov_sequences(n_users=30, n_items=20, min_len=5, max_len=14, seed=3)
    return seqs, *leave_last_out_small(seqs)


def _fitted(name: str) -> Recommender:
    config_cls, model_cls = get_model(name)
    _, train, valid, _ = _data()
    kwargs = SETTINGS.get(name, {"dim": 16} if "dim" in _fields(config_cls) else {})
    if issubclass(config_cls, NeuralConfig):  # the tiny training budget of the conformance suite
        config = settings(config_cls, **{**TINY, "epochs": 1, **kwargs})
        return model_cls(config).fit(train, valid, progress=False)
    return model_cls(config_cls(**kwargs)).fit(train, valid)


def _fields(cls) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def _grown_vocab(vocab: ItemVocab) -> ItemVocab:
    return vocab.extend([f"new{i}" for i in range(NEW_ITEMS)] + ["i1"])


@pytest.mark.parametrize("name", model_names())
def test_growth_keeps_old_scores(name):
    model = _fitted(name)
    _, train, _, test = _data()
    histories = test.histories()
    before = model.score(histories, None)
    old_n = model.n_items
    users = NEW_USERS + len(train)
    added = model.grow(_grown_vocab(model.vocab), n_users=users)
    assert added == NEW_ITEMS and model.n_items == old_n + NEW_ITEMS
    assert len(model.popularity) == model.n_items + 1 and not model.popularity[old_n + 1 :].any()
    after = model.score(histories, None)
    assert after.shape == (len(histories), old_n + NEW_ITEMS + 1)
    # the old items' scores are those of the model before growing (same weights, same inputs)
    np.testing.assert_allclose(after[:, : old_n + 1], before, rtol=1e-5, atol=1e-5)
    assert np.isfinite(after[:, old_n + 1 :]).all()
    # the grown model saves and loads with its new size
    with tempfile.TemporaryDirectory() as tmp:
        model.save(Path(tmp) / "m")
        again = load_recommender(Path(tmp) / "m")
    assert again.n_items == model.n_items
    np.testing.assert_allclose(again.score(histories, None), after, rtol=1e-5, atol=1e-5)


def test_vocab_extend_keeps_old_ids_and_appends_new_ones():
    vocab = ItemVocab(np.array([10, 20, 30]), titles=np.array(["a", "b", "c"], object))
    grown = vocab.extend([20, 40, "40", 50], titles={40: "forty"})
    assert grown.raw.tolist() == [10, 20, 30, 40, 50]
    assert grown.encode([10, 30, 40, 50]).tolist() == [1, 3, 4, 5]
    assert grown.title(4) == "forty" and grown.title(5) is None and grown.title(1) == "a"
    assert vocab.extend([10, 30]) is vocab
    text = ItemVocab(np.array(["ab", "cd"]))
    assert text.extend(["a-much-longer-id"]).raw.tolist() == ["ab", "cd", "a-much-longer-id"]
    with pytest.raises(DataError, match="not integers"):
        vocab.extend(["sku9"])


def test_growth_refuses_a_vocabulary_that_renumbers_items():
    model = _fitted("pop")
    shuffled = ItemVocab(model.vocab.raw[::-1].copy())
    with pytest.raises(DataError, match="does not extend"):
        model.grow(shuffled)


class _Frozen(Recommender):
    """A plugin-style model without ``_grow``."""

    name = "frozen"

    def fit(self, train, valid=None):
        self._remember_catalogue(train)
        return self

    def _score(self, histories, query_times):
        return np.zeros((len(histories), self.n_items + 1), np.float32)

    def _state(self):
        return {}

    def _load_state(self, state):
        pass


def test_a_model_without_growth_refuses_in_one_line():
    _, train, _, _ = _data()
    model = _Frozen(None).fit(train)
    with pytest.raises(ConfigError, match="frozen cannot grow its catalogue: ") as info:
        model.grow(_grown_vocab(model.vocab))
    assert "\n" not in str(info.value)


def _update_data(vocab: ItemVocab, n_users: int) -> Sequences:
    """Old users' train rows plus sequences of new users that use the new items."""
    _, train, _, _ = _data()
    grown = _grown_vocab(vocab)
    n = len(grown)
    rows = [list(train.row(r)) for r in range(len(train))]
    new_ids = list(range(len(vocab) + 1, n + 1))
    rows += [[1, new_ids[0], new_ids[1], 2, new_ids[2]] for _ in range(n_users)]
    return Sequences.from_lists(
        rows, n_items=n, users=np.arange(len(rows)), vocab=grown, timestamps=None
    )


@pytest.mark.parametrize("name", ["sasrec", "fpmc", "bert4rec", "puresvd"])
def test_fit_partial_grows_and_learns_the_new_items(name):
    model = _fitted(name)
    old_n = model.n_items
    data = _update_data(model.vocab, NEW_USERS)
    if name == "puresvd":
        model.fit_partial(data)
    else:
        before = {k: v.clone() for k, v in model.encoder.state_dict().items()}
        model.fit_partial(data, epochs=4, lr=1e-2, progress=False)
        assert model.training_log.epochs_run == 4
        assert getattr(model, "n_users", len(data)) == len(data)  # FPMC's user table grew
        after = model.encoder.state_dict()
        # training moved the old weights (compared on the rows they had before growing)
        assert any(
            v.is_floating_point() and not np.allclose(after[k][: len(v)], v)
            for k, v in before.items()
        )
    assert model.n_items == old_n + NEW_ITEMS
    h = Sequences.from_lists([[1, old_n + 1]], n_items=model.n_items)
    scores = model.score(h)
    assert np.isfinite(scores[:, 1:]).all()
    # the new items were trained: the next item after (1, new0) in the update data is new1
    assert scores[0, old_n + 2] > np.median(scores[0, 1:])


@pytest.mark.parametrize("name", ["sasrec", "puresvd"])
def test_fit_partial_rebuilds_the_item_index_over_the_new_weights(name, tmp_path):
    ann = pytest.importorskip("seqrec.models.ann")
    pytest.importorskip("faiss")
    model = _fitted(name)
    params = ann.IndexParams(kind="hnsw", ef_search=64)
    model.index = ann.ItemIndex.build(model.item_vectors(), params)
    data = _update_data(model.vocab, NEW_USERS)
    options = {} if name == "puresvd" else {"epochs": 2, "lr": 1e-2, "progress": False}
    model.fit_partial(data, **options)
    # the index covers the grown catalogue, with the same parameters, and answers for the new
    # weights: its vectors are the model's item table now
    assert model.index is not None and model.index.n_items == model.n_items
    assert model.index.params == params
    items = np.arange(1, model.n_items + 1)
    np.testing.assert_allclose(
        model.index.vectors(items), model.item_vectors()[items], rtol=1e-5, atol=1e-5
    )
    model.save(tmp_path / "m")  # and the saved artifact loads with it
    again = load_recommender(tmp_path / "m")
    assert again.index is not None and again.index.n_items == model.n_items


def test_growing_alone_drops_the_item_index(caplog):
    ann = pytest.importorskip("seqrec.models.ann")
    pytest.importorskip("faiss")
    model = _fitted("sasrec")
    model.index = ann.ItemIndex.build(model.item_vectors(), ann.IndexParams())
    with caplog.at_level("WARNING"):
        model.grow(_grown_vocab(model.vocab))
    assert model.index is None and "item index was dropped" in caplog.text
