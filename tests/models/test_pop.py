"""Most-popular baseline."""

from __future__ import annotations

import numpy as np
import pytest

from seqrec.data.sequences import Sequences
from seqrec.errors import ConfigError, NotFittedError
from seqrec.models.base import Recommender
from seqrec.models.factorization import Pop, PopConfig


def _train() -> Sequences:
    # item 3 x4, item 1 x3, item 5 x2, item 2 x1, item 4 x0
    return Sequences.from_lists([[3, 1, 5], [3, 1], [3, 1, 5, 2], [3]], n_items=5)


def test_pop_ranks_by_training_count():
    model = Pop().fit(_train())
    scores = model.score(Sequences.from_lists([[4], [2, 5]], n_items=5))
    assert np.isneginf(scores[:, 0]).all()
    order = np.argsort(-scores[0, 1:], kind="stable") + 1
    assert order.tolist() == [3, 1, 5, 2, 4]
    assert scores[0].tolist() == scores[1].tolist()  # history does not matter
    assert scores[0, 1:].tolist() == [3, 1, 4, 0, 2]


def test_pop_recent_counts_only_latest_items():
    model = Pop(PopConfig(recent=1)).fit(_train())
    assert model.score(Sequences.from_lists([[1]], n_items=5))[0, 1:].tolist() == [1, 1, 1, 0, 1]


def test_pop_recommend_excludes_seen_and_empty_history_falls_back():
    model = Pop().fit(_train())
    out = model.score(Sequences.from_lists([[]], n_items=5))
    assert np.argmax(out[0, 1:]) + 1 == 3


def test_pop_save_load_keeps_scores(tmp_path):
    model = Pop().fit(_train())
    hist = Sequences.from_lists([[1, 2]], n_items=5)
    loaded = Recommender.load(model.save(tmp_path / "pop"))
    assert isinstance(loaded, Pop)
    assert np.array_equal(loaded.score(hist), model.score(hist))


def test_pop_bad_config_and_unfitted():
    with pytest.raises(ConfigError, match="recent"):
        PopConfig(recent=-1)
    with pytest.raises(NotFittedError):
        Pop().score(Sequences.from_lists([[1]], n_items=5))


def test_recommend_refuses_a_flat_list_of_ids():
    """recommend(["sku1", "sku2"]) read each id as a history of its characters (or failed on
    ints); a list of histories and a generator of them work."""
    from seqrec.data.vocab import ItemVocab
    from seqrec.errors import DataError

    vocab = ItemVocab(np.array(["a", "b", "c", "d", "e"], dtype=object))
    model = Pop().fit(Sequences.from_lists([[3, 1, 5], [3, 1]], n_items=5, vocab=vocab))
    for flat in (["a", "b"], "a", [1, 2]):
        with pytest.raises(DataError, match="a list of histories"):
            model.recommend(flat, k=2)
    (one,) = model.recommend([["a", "b"]], k=2)
    assert one.items == model.recommend(h for h in [["a", "b"]])[0].items[:2]
