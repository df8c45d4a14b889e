"""What one epoch of next-item training iterates over, and the batch it is cut into.

The rows are the training sequences themselves (``train_windows='last'``: each user's most
recent ``max_len`` transitions) or their sliding windows (``'sliding'``: every transition once);
:func:`resolved_batch` turns ``batch_size = 0`` into a batch sized by training targets
(``batch_targets``, grown by ``min_epoch_steps`` up to ``auto_batch_max``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from seqrec.data.batching import SequenceBatch
from seqrec.data.sequences import Sequences


def training_rows(
    train: Sequences, cfg: Any, max_len: int
) -> tuple[Sequences, np.ndarray | None, np.ndarray]:
    """What one epoch of training config ``cfg`` iterates over (windows of ``max_len``, the
    model's input length): the training sequences (``train`` itself, or its sliding
    windows), the user row of each window (None without windows) and the rows with at least
    one transition."""
    from seqrec.data.batching import sliding_windows

    windows, source = (
        sliding_windows(train, max_len, cfg.window_stride)
        if cfg.train_windows == "sliding"
        else (train, None)
    )
    return windows, source, np.flatnonzero(windows.lengths >= 2)


def targets_per_row(windows: Sequences, rows: np.ndarray, cfg: Any, max_len: int) -> np.ndarray:
    """Training targets of each row under the shared next-item batching: its transitions,
    at most ``max_len``, and at most ``window_stride`` with overlapping windows."""
    n = np.minimum(np.maximum(windows.lengths[rows] - 1, 0), max_len)
    return np.minimum(n, cfg.window_stride) if cfg.window_stride else n


def resolved_batch(cfg: Any, windows: Sequences, rows: np.ndarray, max_len: int) -> Any:
    """``cfg`` (a training config) with the global batch it trains with: a ``batch_size`` of 0 set from
    ``batch_targets`` and ``min_epoch_steps`` (a ``batch_size`` > 0 is returned unchanged)."""
    if cfg.batch_size:
        return cfg
    mean = float(targets_per_row(windows, rows, cfg, max_len).mean()) if len(rows) else 1.0
    batch = max(1, round(cfg.batch_targets / max(mean, 1.0)))
    if cfg.min_epoch_steps:
        batch = max(batch, min(cfg.auto_batch_max, len(rows) // cfg.min_epoch_steps))
    return dataclasses.replace(cfg, batch_size=batch)


def steps_per_epoch(train: Sequences, cfg: Any, max_len: int) -> int:
    """Optimizer steps in one epoch of training config ``cfg`` over ``train``."""
    windows, _, rows = training_rows(train, cfg, max_len)
    return -(-len(rows) // resolved_batch(cfg, windows, rows, max_len).batch_size)


def context_only(batch: SequenceBatch, cfg: Any, max_len: int) -> SequenceBatch:
    """With overlapping windows (``0 < window_stride < max_len``) only the newest
    ``window_stride`` targets of a window are its own; the older ones belong to an older window
    and stay context (their targets are cleared). Targets are right-aligned."""
    if 0 < cfg.window_stride < max_len:
        batch.targets[:, : max_len - cfg.window_stride] = 0
    return batch


def target_positions(data: dict) -> float:
    """What the next-item losses average over: the batch's non-PAD target positions."""
    return float((data["batch"].targets > 0).sum())
