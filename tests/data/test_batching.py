"""Property tests of left-padded batch building."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from seqrec.data.batching import inference_batch, left_pad, sliding_windows, training_batch
from seqrec.data.sequences import Sequences

rows_strategy = st.lists(
    st.lists(st.integers(1, 30), min_size=0, max_size=25), min_size=1, max_size=8
)


def _seqs(rows):
    times = [[1000 + 10 * j for j in range(len(r))] for r in rows]
    return Sequences.from_lists(rows, n_items=30, timestamps=times)


@settings(max_examples=60, deadline=None)
@given(rows=rows_strategy, max_len=st.integers(1, 30))
def test_left_pad_keeps_most_recent_and_pads_left(rows, max_len):
    seqs = _seqs(rows)
    items, times = left_pad(seqs, np.arange(len(rows)), max_len)
    assert items.shape == (len(rows), max_len)
    for r, row in enumerate(rows):
        kept = row[-max_len:] if row else []
        n_pad = max_len - len(kept)
        assert items[r, :n_pad].tolist() == [0] * n_pad
        assert items[r, n_pad:].tolist() == kept
        expected_t = [1000 + 10 * j for j in range(len(row))][-max_len:] if row else []
        assert times[r, n_pad:].tolist() == expected_t


@settings(max_examples=60, deadline=None)
@given(rows=rows_strategy, max_len=st.integers(1, 30))
def test_training_batch_targets_are_next_items(rows, max_len):
    seqs = _seqs(rows)
    batch = training_batch(seqs, np.arange(len(rows)), max_len)
    items, targets, mask = batch.items.numpy(), batch.targets.numpy(), batch.mask.numpy()
    assert (mask == (items != 0)).all()
    assert (targets[~mask] == 0).all()
    for r, row in enumerate(rows):
        pairs = list(zip(row[:-1], row[1:], strict=False))[-max_len:]
        got = [(a, b) for a, b, m in zip(items[r], targets[r], mask[r], strict=False) if m]
        assert got == pairs


def test_inference_batch_matches_left_pad():
    seqs = _seqs([[1, 2, 3], [4], [5, 6, 7, 8, 9]])
    batch = inference_batch(seqs, 4, query_times=np.array([1, 2, 3]))
    assert batch.items.tolist() == [[0, 1, 2, 3], [0, 0, 0, 4], [6, 7, 8, 9]]
    assert batch.query_times.tolist() == [1, 2, 3]
    assert batch.to("cpu").items.shape == (3, 4)


@settings(max_examples=60, deadline=None)
@given(rows=rows_strategy, max_len=st.integers(1, 30))
def test_sliding_windows_train_every_transition_exactly_once(rows, max_len):
    seqs = _seqs(rows)
    windows, source = sliding_windows(seqs, max_len)
    assert len(source) == len(windows) and (windows.lengths <= max_len + 1).all()
    batch = training_batch(windows, np.arange(len(windows)), max_len)
    items, targets, mask = batch.items.numpy(), batch.targets.numpy(), batch.mask.numpy()
    for r, row in enumerate(rows):
        got = []
        for w in np.flatnonzero(source == r)[::-1]:  # oldest window first
            got += [(a, b) for a, b, m in zip(items[w], targets[w], mask[w], strict=False) if m]
        assert got == list(zip(row[:-1], row[1:], strict=False))  # all of them, in order, once
        assert windows.timestamps is not None


@settings(max_examples=60, deadline=None)
@given(rows=rows_strategy, max_len=st.integers(1, 12), data=st.data())
def test_overlapping_windows_train_every_transition_once_with_context(rows, max_len, data):
    """With a stride below max_len, each window's newest ``stride`` targets (what the model's
    batch keeps) cover every transition once, and each sees max_len - stride items or the
    whole history before it."""
    stride = data.draw(st.integers(1, max_len))
    seqs = _seqs(rows)
    windows, source = sliding_windows(seqs, max_len, stride)
    assert (windows.lengths <= max_len + 1).all()
    batch = training_batch(windows, np.arange(len(windows)), max_len)
    items, targets = batch.items.numpy(), batch.targets.numpy()
    targets[:, : max_len - stride] = 0
    for r, row in enumerate(rows):
        got = []
        for w in np.flatnonzero(source == r)[::-1]:  # oldest window first
            for j in np.flatnonzero(targets[w]):
                got.append((items[w, j], targets[w, j]))
                t = len(got)  # the target is row[t]: it follows t items
                assert (items[w, : j + 1] != 0).sum() >= min(t, max_len - stride + 1)
        assert got == list(zip(row[:-1], row[1:], strict=False))


def test_sliding_windows_reject_a_stride_beyond_max_len():
    import pytest

    with pytest.raises(ValueError, match="stride"):
        sliding_windows(_seqs([[1, 2, 3]]), 3, 4)


def test_sliding_windows_keep_short_rows_whole():
    seqs = _seqs([[1, 2, 3], [4, 5, 6, 7, 8, 9, 10]])
    windows, source = sliding_windows(seqs, 3)
    assert source.tolist() == [0, 1, 1]
    assert [windows.row(i).tolist() for i in range(3)] == [[1, 2, 3], [7, 8, 9, 10], [4, 5, 6, 7]]
