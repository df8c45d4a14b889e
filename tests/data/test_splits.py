"""Property tests of the evaluation splits: no target in its own input, no future leakage."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seqrec.data.sequences import Sequences
from seqrec.data.splits import leave_last_out, parse_window, temporal_split
from seqrec.errors import ConfigError, DataError


@st.composite
def timed_sequences(draw):
    n_users = draw(st.integers(1, 8))
    rows, times = [], []
    for _ in range(n_users):
        n = draw(st.integers(1, 12))
        rows.append(draw(st.lists(st.integers(1, 15), min_size=n, max_size=n)))
        times.append(sorted(draw(st.lists(st.integers(0, 100), min_size=n, max_size=n))))
    return Sequences.from_lists(rows, n_items=15, timestamps=times, users=np.arange(n_users))


@settings(max_examples=80, deadline=None)
@given(seqs=timed_sequences())
def test_leave_last_out_targets_are_last_items(seqs):
    split = leave_last_out(seqs)
    for targets, back in ((split.valid, 2), (split.test, 1)):
        for t, row in enumerate(targets.rows):
            full = seqs.row(row)
            assert len(full) >= 3
            assert targets.cutoffs[t] == len(full) - back
            assert targets.items[t] == full[-back]
            # the target is never part of its own input
            assert len(targets.histories(np.array([t])).items) == len(full) - back
    for r in range(len(seqs)):
        n = len(seqs.row(r))
        assert len(split.train.row(r)) == (n - 2 if n >= 3 else n)
        assert len(split.train_valid.row(r)) == (n - 1 if n >= 3 else n)
    # test input includes the validation item
    if len(split.test):
        hist = split.test.histories()
        assert hist.row(0)[-1] == split.valid.items[0]


@settings(max_examples=80, deadline=None)
@given(seqs=timed_sequences(), v=st.integers(1, 5), t=st.integers(1, 5))
def test_temporal_split_never_feeds_the_future(seqs, v, t):
    if len(seqs.items) <= v + t:
        with pytest.raises((ConfigError, DataError)):
            temporal_split(seqs, valid=v, test=t)
        return
    try:
        split = temporal_split(seqs, valid=v, test=t)
    except DataError:
        return  # no targets at all: reported, not silently empty
    train_max = split.train.timestamps.max()
    for targets, fitted_on in ((split.valid, split.train), (split.test, split.train_valid)):
        known = set(fitted_on.items.tolist())
        hist = targets.histories()
        for j in range(len(targets)):
            h_times = hist.row_times(j)
            assert len(h_times) >= 1
            assert (h_times <= targets.times[j]).all()  # history never after the target
            assert targets.items[j] in known  # unseen items dropped
        assert targets.times.min() >= train_max  # targets lie in the windows
        assert (np.diff(targets.times) >= 0).all()  # in time order


def test_temporal_split_by_duration_and_growing_history():
    day = 86400
    seqs = Sequences.from_lists(
        [[1, 2, 3, 1], [2, 3, 1, 2]],
        n_items=3,
        timestamps=[[0, day, 30 * day, 31 * day], [0, 2 * day, 29 * day, 32 * day]],
    )
    split = temporal_split(seqs, valid="3D", test="3D")
    # test window (29D, 32D]: items at 30D, 31D (user 0) and 32D (user 1); valid (26D, 29D]
    assert split.test.items.tolist() == [3, 1, 2]
    assert split.test.cutoffs.tolist() == [2, 3, 3]  # user 0's second target sees the first
    assert split.valid.items.tolist() == [1]


def test_parse_window():
    assert parse_window("3W") == ("time", 21 * 86400)
    assert parse_window(100) == ("count", 100)
    with pytest.raises(ConfigError):
        parse_window("3 weeks")
    with pytest.raises(DataError):
        temporal_split(Sequences.from_lists([[1, 2]], n_items=2))
