"""``SequenceBatch``: left-padded tensors built from ``Sequences`` with vectorized NumPy."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import torch

from seqrec.data.sequences import Sequences


def left_pad(
    seqs: Sequences, rows: np.ndarray, max_len: int, drop_last: int = 0
) -> tuple[np.ndarray, np.ndarray | None]:
    """Left-padded ``[B, max_len]`` items (and timestamps) of ``rows``, keeping the most recent.

    ``drop_last`` removes that many items from the end of each row first (used to build
    inputs whose next items are the targets).
    """
    rows = np.asarray(rows, dtype=np.int64)
    stops = seqs.offsets[rows + 1] - drop_last
    starts = np.maximum(seqs.offsets[rows], stops - max_len)
    lengths = np.maximum(stops - starts, 0)
    b = len(rows)
    items = np.zeros((b, max_len), dtype=np.int64)
    times = None if seqs.timestamps is None else np.zeros((b, max_len), dtype=np.int64)
    total = int(lengths.sum())
    if total:
        row_of = np.repeat(np.arange(b), lengths)
        # position inside the padded row: right-aligned
        first = np.repeat(max_len - lengths, lengths)
        within = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        src = np.repeat(starts, lengths) + within
        items[row_of, first + within] = seqs.items[src]
        if times is not None:
            times[row_of, first + within] = seqs.timestamps[src]
    return items, times


@dataclass
class SequenceBatch:
    """A batch of left-padded sequences (0 = PAD).

    Attributes:
        items: ``[B, L]`` input item ids.
        mask: ``[B, L]`` True at real (non-PAD) positions.
        timestamps: optional ``[B, L]`` Unix seconds.
        targets: optional ``[B, L]`` next-item targets (0 where there is none).
        query_times: optional ``[B]`` time of the prediction (HSTU's relative time anchor).
        users: optional ``[B]`` internal user ids.
    """

    items: torch.Tensor
    mask: torch.Tensor
    timestamps: torch.Tensor | None = None
    targets: torch.Tensor | None = None
    query_times: torch.Tensor | None = None
    users: torch.Tensor | None = None

    def to(self, device: torch.device | str) -> SequenceBatch:
        moved = {
            f.name: (None if getattr(self, f.name) is None else getattr(self, f.name).to(device))
            for f in fields(self)
        }
        return SequenceBatch(**moved)

    def __len__(self) -> int:
        return self.items.shape[0]


def _tensor(a: np.ndarray | None) -> torch.Tensor | None:
    return None if a is None else torch.from_numpy(a)


def training_batch(seqs: Sequences, rows: np.ndarray, max_len: int) -> SequenceBatch:
    """Inputs ``x[:-1]`` and shifted targets ``x[1:]`` for every position, left-padded.

    Truncation keeps the most recent ``max_len`` transitions.
    """
    inputs, times = left_pad(seqs, rows, max_len, drop_last=1)
    # targets are the same rows shifted by one: the input window moved one step right
    targets, _ = left_pad(_shift_view(seqs), rows, max_len)
    targets[inputs == 0] = 0
    return SequenceBatch(
        items=torch.from_numpy(inputs),
        mask=torch.from_numpy(inputs != 0),
        timestamps=_tensor(times),
        targets=torch.from_numpy(targets),
        users=_tensor(None if seqs.users is None else seqs.users[rows]),
    )


def _shift_view(seqs: Sequences) -> Sequences:
    """Rows without their first item (so position j holds the successor of input j)."""
    cached = getattr(seqs, "_shifted", None)
    if cached is not None:  # built once per Sequences, not once per batch
        return cached
    n = len(seqs)
    lengths = seqs.lengths
    starts = np.minimum(seqs.offsets[:-1] + 1, seqs.offsets[1:])
    shifted = seqs.slice_rows(np.arange(n), starts - seqs.offsets[:-1], lengths)
    object.__setattr__(seqs, "_shifted", shifted)  # Sequences is frozen; cache by identity
    return shifted


def inference_batch(
    histories: Sequences, max_len: int, query_times: np.ndarray | None = None
) -> SequenceBatch:
    """Left-padded inputs of every row of ``histories`` (the last position predicts next)."""
    rows = np.arange(len(histories))
    inputs, times = left_pad(histories, rows, max_len)
    return SequenceBatch(
        items=torch.from_numpy(inputs),
        mask=torch.from_numpy(inputs != 0),
        timestamps=_tensor(times),
        query_times=_tensor(None if query_times is None else np.asarray(query_times, np.int64)),
        users=_tensor(histories.users),
    )


def sliding_windows(seqs: Sequences, max_len: int, stride: int = 0) -> tuple[Sequences, np.ndarray]:
    """Cut every row into windows of at most ``max_len + 1`` items (``max_len`` transitions).

    The newest window ends at the row's last item and each older one ends ``stride`` items
    earlier (0 = ``max_len``: where the next starts, sharing one item), so with each window
    training its newest ``stride`` targets every transition ``x_t -> x_{t+1}`` of a row is a
    training target exactly once, instead of only the most recent ``max_len`` ones. This is the
    training data of the LRURec code (``sliding_window_size = 1``), which however cuts only rows
    of at least ``2 * max_len`` items and drops the oldest remainder. A ``stride`` below
    ``max_len`` overlaps the windows, so that the older positions of a window give context to
    its trained ones (the caller masks them as targets).

    Returns:
        the windows (rows in order: each source row's windows newest first) and the source row
        of each window (``int64 [W]``).
    """
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    if not 0 <= stride <= max_len:
        raise ValueError(f"stride must be in [0, max_len], got {stride}")
    step = stride or max_len
    lengths = seqs.lengths
    # windows per row: ceil((n - 1) / step), at least 1
    counts = np.maximum(1, -(-(lengths - 1) // step))
    source = np.repeat(np.arange(len(seqs), dtype=np.int64), counts)
    # k-th window of a row, newest first: ends at n - k*step
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])
    k = np.arange(len(source), dtype=np.int64) - np.repeat(first, counts)
    stops = lengths[source] - k * step
    starts = np.maximum(0, stops - max_len - 1)
    return seqs.slice_rows(source, starts, stops), source
