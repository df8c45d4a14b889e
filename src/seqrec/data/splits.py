"""Evaluation splits: leave-last-out, global temporal and item-cold.

Both return a ``Split`` whose ``valid`` and ``test`` are ``Targets`` (history cut-offs into a
sequence set), so no target ever appears in its own input and a temporal target never sees a
later interaction.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from seqrec.data.sequences import Sequences, Targets
from seqrec.errors import ConfigError, DataError

_UNITS = {"s": 1, "h": 3600, "D": 86400, "W": 7 * 86400, "M": 30 * 86400, "Y": 365 * 86400}


@dataclass(frozen=True)
class Split:
    """Training data and evaluation targets of one protocol.

    Attributes:
        train: what the model is fitted on for validation.
        valid: validation targets (model selection only).
        test: test targets.
        train_valid: train plus validation interactions, for "refit, then test".
        protocol: ``"leave-last-out"``, ``"temporal"`` or ``"item-cold"``.
        info: counts and boundaries, recorded with every result.
        cold_items: the internal ids held out of training entirely (``"item-cold"``; None
            otherwise): targets that are one of them are measured apart (``cold_targets``).
    """

    train: Sequences
    valid: Targets
    test: Targets
    train_valid: Sequences
    protocol: str
    info: dict[str, Any] = field(default_factory=dict)
    cold_items: np.ndarray | None = None

    def cold_targets(self, targets: Targets, cold: bool = True) -> Targets:
        """The targets of ``targets`` whose item is (``cold``) or is not one of the held-out
        items (all of them, or none, for a split without held-out items)."""
        held = np.zeros(targets.sequences.n_items + 1, bool)
        if self.cold_items is not None:
            held[self.cold_items] = True
        return targets.subset(np.flatnonzero(held[targets.items] == cold))


def leave_last_out(seqs: Sequences) -> Split:
    """Last item = test target, second last = validation target, the rest trains.

    The test input includes the validation item. Users with fewer than 3 interactions only
    contribute training data (as in SASRec's reference code).
    """
    lengths = seqs.lengths
    rows = np.arange(len(seqs))
    eligible = rows[lengths >= 3]
    drop = np.where(lengths >= 3, 2, 0)
    starts = np.zeros(len(seqs), np.int64)
    train = seqs.slice_rows(rows, starts, lengths - drop)
    train_valid = seqs.slice_rows(rows, starts, lengths - np.minimum(drop, 1))
    ends = seqs.offsets[eligible + 1]

    def targets(back: int) -> Targets:
        pos = ends - back
        times = None if seqs.timestamps is None else seqs.timestamps[pos]
        return Targets(seqs, eligible, lengths[eligible] - back, seqs.items[pos], times)

    info = {
        "users": len(seqs),
        "eval_users": int(len(eligible)),
        "train_interactions": int(len(train.items)),
        "note": "users with < 3 interactions only train",
    }
    return Split(train, targets(2), targets(1), train_valid, "leave-last-out", info)


def item_cold_split(seqs: Sequences, share: float = 0.1, seed: int = 0) -> Split:
    """Leave-last-out with a share of the items held out of training entirely.

    ``round(share * items)`` of the items that occur (at least one) are drawn with ``seed``;
    every interaction with them is removed from ``train`` and ``train_valid``, so a model never
    trains on them. The validation and test targets are leave-last-out's: a target that is a
    held-out item is a cold target (:meth:`Split.cold_targets`; the evaluation reports them
    apart). Histories are left whole: a user who met a held-out item earlier still has it in
    the history the model reads (the model has never trained on it).
    """
    if not 0.0 < share < 1.0:
        raise ConfigError(f"split.cold_share must be in (0, 1), got {share!r}")
    base = leave_last_out(seqs)
    present = np.flatnonzero(seqs.item_counts()[1:] > 0) + 1
    n_cold = max(1, int(round(share * len(present))))
    if n_cold >= len(present):
        raise DataError(f"holding out {n_cold} of {len(present)} items leaves none to train on")
    rng = np.random.default_rng([seed, 0xC01D])
    cold = np.sort(rng.choice(present, size=n_cold, replace=False)).astype(np.int64)
    held = np.zeros(seqs.n_items + 1, bool)
    held[cold] = True

    def without(part: Sequences) -> Sequences:
        keep = np.flatnonzero(~held[part.items])
        counts = np.bincount(part.row_ids[keep], minlength=len(part))
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        times = None if part.timestamps is None else part.timestamps[keep]
        return Sequences(
            offsets, part.items[keep], part.n_items, times, part.users, part.vocab, part.has_time
        )

    train, train_valid = without(base.train), without(base.train_valid)
    info = {
        **base.info,
        "train_interactions": int(len(train.items)),
        "cold_share": share,
        "cold_items": int(n_cold),
        "cold_valid_targets": int(held[base.valid.items].sum()),
        "cold_test_targets": int(held[base.test.items].sum()),
        "note": "users with < 3 interactions only train; held-out items never train",
    }
    return Split(train, base.valid, base.test, train_valid, "item-cold", info, cold)


def parse_window(spec: str | int) -> tuple[str, int]:
    """``"3W"`` -> ("time", seconds); ``1000`` or ``"1000"`` -> ("count", 1000).

    Units: s, h, D (day), W (week), M (30 days), Y (365 days).
    """
    if isinstance(spec, (int, np.integer)):
        value, unit = int(spec), ""
    else:
        m = re.fullmatch(r"\s*(\d+)\s*([shDWMY]?)\s*", str(spec))
        if not m:
            raise ConfigError(
                f"window must be a count like 1000 or a duration like 3W (units s h D W M Y), got {spec!r}"
            )
        value, unit = int(m.group(1)), m.group(2)
    if value < 1:
        raise ConfigError(f"window must be >= 1, got {spec!r}")
    return ("count", value) if unit == "" else ("time", value * _UNITS[unit])


def _window_parts(times: np.ndarray, valid: str | int, test: str | int) -> tuple[np.ndarray, dict]:
    """Part of every interaction: 0 train, 1 valid, 2 test, by global time (or count)."""
    kind_v, size_v = parse_window(valid)
    kind_t, size_t = parse_window(test)
    if kind_v != kind_t:
        raise ConfigError("valid and test windows must both be durations or both be counts")
    parts = np.zeros(len(times), np.int8)
    if kind_t == "time":
        t_max = int(times.max())
        test_start = t_max - size_t
        valid_start = test_start - size_v
        parts[times > valid_start] = 1
        parts[times > test_start] = 2
        info = {"valid_start": valid_start, "test_start": test_start, "t_max": t_max}
    else:
        order = np.argsort(times, kind="stable")
        if size_t + size_v >= len(times):
            raise ConfigError(f"windows of {size_v}+{size_t} interactions leave no training data")
        parts[order[-(size_t + size_v) :]] = 1
        parts[order[-size_t:]] = 2
        info = {"valid_count": size_v, "test_count": size_t}
    return parts, info


def temporal_split(seqs: Sequences, valid: str | int = "3W", test: str | int = "3W") -> Split:
    """Global temporal split (SATF paper protocol).

    Validation and test windows sit at the end of the timeline. Every interaction in a window
    is a target, in time order, whose history is the user's earlier interactions (training
    plus earlier window items). Window items whose item never occurs in the data the model
    is fitted on (``train`` for valid, ``train_valid`` for test) are dropped entirely. A user
    with no earlier history contributes its first window item as history only.
    """
    if seqs.timestamps is None:
        raise DataError("the temporal split needs timestamps; this data has only an order")
    parts, info = _window_parts(seqs.timestamps, valid, test)
    row_ids = seqs.row_ids
    train_mask = parts == 0
    if not train_mask.any():
        raise DataError("the validation and test windows cover the whole timeline")
    known_train = np.zeros(seqs.n_items + 1, bool)
    known_train[seqs.items[train_mask]] = True
    known_tv = known_train.copy()
    known_tv[seqs.items[parts == 1]] = True

    def subset(mask: np.ndarray) -> Sequences:
        keep = np.flatnonzero(mask)
        counts = np.bincount(row_ids[keep], minlength=len(seqs))
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return Sequences(
            offsets,
            seqs.items[keep],
            seqs.n_items,
            seqs.timestamps[keep],
            seqs.users,
            seqs.vocab,
            seqs.has_time,
        )

    def targets(mask: np.ndarray, part: int) -> tuple[Targets, int]:
        sub = subset(mask)
        sub_parts = parts[mask]
        pos_in_row = np.arange(len(sub.items)) - np.repeat(sub.offsets[:-1], sub.lengths)
        is_target = (sub_parts == part) & (pos_in_row > 0)
        idx = np.flatnonzero(is_target)
        rows = np.repeat(np.arange(len(sub)), sub.lengths)[idx]
        order = np.argsort(sub.timestamps[idx], kind="stable")  # targets in time order
        idx, rows = idx[order], rows[order]
        t = Targets(sub, rows, pos_in_row[idx], sub.items[idx], sub.timestamps[idx])
        return t, int(((sub_parts == part) & (pos_in_row == 0)).sum())

    valid_mask = train_mask | ((parts == 1) & known_train[seqs.items])
    test_mask = (parts <= 1) | ((parts == 2) & known_tv[seqs.items])
    valid_t, valid_history_only = targets(valid_mask, 1)
    test_t, test_history_only = targets(test_mask, 2)
    info.update(
        {
            "train_interactions": int(train_mask.sum()),
            "valid_targets": len(valid_t),
            "test_targets": len(test_t),
            "valid_dropped_unseen": int(((parts == 1) & ~known_train[seqs.items]).sum()),
            "test_dropped_unseen": int(((parts == 2) & ~known_tv[seqs.items]).sum()),
            "valid_history_only": valid_history_only,
            "test_history_only": test_history_only,
        }
    )
    if len(valid_t) == 0 or len(test_t) == 0:
        raise DataError(f"temporal split produced no targets: {info}")
    return Split(subset(train_mask), valid_t, test_t, subset(parts <= 1), "temporal", info)
