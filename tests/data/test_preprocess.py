import numpy as np
import pytest

from seqrec.data.interactions import Interactions
from seqrec.data.preprocess import (
    PreprocessConfig,
    chronological,
    deduplicate,
    k_core,
    min_count_filter,
    preprocess,
)
from seqrec.errors import ConfigError, DataError


def _inter(users, items, times, rating=None):
    return Interactions(np.array(users), np.array(items), np.array(times), rating=rating)


def test_validation_errors():
    with pytest.raises(DataError, match="empty"):
        _inter([], [], [])
    with pytest.raises(DataError, match="negative"):
        _inter([1], [1], [-5])
    with pytest.raises(DataError, match="integers"):
        _inter([1.5], [1], [0])
    with pytest.raises(DataError, match="NaN"):
        _inter([1], [1], [np.nan])
    with pytest.raises(DataError, match="missing required column 'item'"):
        Interactions(np.array([1]), None, np.array([1]))


def test_chronological_is_stable_on_ties():
    inter = chronological(_inter([2, 1, 1, 1], [9, 5, 6, 7], [0, 3, 1, 1]))
    assert inter.item.tolist() == [6, 7, 5, 9]
    assert any("stable" in n for n in inter.notes)


def test_dedup_keeps_first():
    inter = deduplicate(_inter([1, 1, 1], [5, 5, 6], [3, 1, 2]))
    assert sorted(zip(inter.item.tolist(), inter.timestamp.tolist(), strict=False)) == [
        (5, 1),
        (6, 2),
    ]


def test_single_pass_vs_k_core():
    # dropping item 4 (1 interaction) removes user 4, which leaves item 5 with one interaction:
    # the single pass keeps it, the iterative k-core removes it and then user 5.
    users = [1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    items = [1, 2, 1, 3, 2, 3, 5, 4, 5, 1]
    inter = _inter(users, items, list(range(10)))
    one = min_count_filter(inter, min_item=2, min_user=2)
    assert set(one.user.tolist()) == {1, 2, 3, 5}
    assert (one.item == 5).sum() == 1
    core = k_core(inter, 2)
    assert set(core.user.tolist()) == {1, 2, 3} and set(core.item.tolist()) == {1, 2, 3}


def test_preprocess_remaps_to_one_based_ids():
    prep = preprocess(_inter([10, 10, 20], [7, 9, 7], [1, 2, 3]))
    assert prep.interactions.item.min() == 1 and prep.n_items == 2
    assert prep.vocab.decode(np.array([1, 2])).tolist() == [7, 9]
    seqs = prep.sequences()
    assert seqs.row(0).tolist() == [1, 2] and seqs.row(1).tolist() == [1]
    assert len(prep.fingerprint()) == 16
    with pytest.raises(ConfigError):
        PreprocessConfig(filter="bogus")
