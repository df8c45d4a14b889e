"""The fast evaluation path (histories batched by length, ``encode_last`` computing only the
last position) gives the same metrics and top-k as the plain one: one batch per chunk cut to its
longest history, ``forward(batch)[:, -1]``."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from seqrec.data.sequences import Sequences, Targets
from seqrec.evaluation import evaluate
from seqrec.models import torch_recommender
from seqrec.models.bsarec import BSARec
from seqrec.models.hstu import HSTU
from seqrec.models.lrurec import LRURec
from seqrec.models.sasrec import SASRec
from seqrec.models.torch_recommender import length_batches
from seqrec.models.tvrec import TVRec
from seqrec.testing.conformance import fitted


def test_length_batches_cover_in_order_within_budgets():
    lengths = np.sort(np.random.default_rng(0).integers(1, 60, size=500))
    cuts = length_batches(lengths, max_rows=40, max_tokens=600)
    assert cuts[0].start == 0 and cuts[-1].stop == len(lengths)
    assert all(a.stop == b.start for a, b in zip(cuts[:-1], cuts[1:], strict=True))
    for s in cuts:
        rows = s.stop - s.start
        assert rows <= 40 and (rows == 1 or rows * lengths[s.stop - 1] <= 600)
    # batches are as long as the budgets allow: the next row would break one of them
    for s in cuts[:-1]:
        rows = s.stop - s.start
        assert rows == 40 or (rows + 1) * lengths[s.stop] > 600
    assert length_batches(np.array([], dtype=np.int64), 4, 10) == []


def _long_histories(n_users: int, n_items: int, seed: int) -> Targets:
    """Histories of very different lengths (2 .. 40), so that the length batches differ from
    one chunk cut to its longest history; the target is each row's last item."""
    rng = np.random.default_rng(seed)
    rows = [rng.integers(1, n_items + 1, size=int(n)) for n in rng.integers(3, 42, n_users)]
    times = [1_000_000 + 3600 * np.arange(len(r), dtype=np.int64) for r in rows]
    seqs = Sequences.from_lists(rows, n_items=n_items, timestamps=times)
    last = np.array([len(r) - 1 for r in rows], dtype=np.int64)
    return Targets(
        seqs,
        rows=np.arange(n_users, dtype=np.int64),
        cutoffs=last,
        items=np.array([r[-1] for r in rows], dtype=np.int64),
        times=np.array([t[-1] for t in times], dtype=np.int64),
    )


@pytest.mark.parametrize("model_cls", [SASRec, LRURec, HSTU, TVRec, BSARec])
def test_fast_evaluation_gives_the_plain_metrics(model_cls, monkeypatch):
    model = fitted(model_cls, {"max_len": 40})
    targets = _long_histories(300, model.n_items, seed=3)
    monkeypatch.setattr(torch_recommender, "EVAL_TOKENS", 400)  # many batches of 300 users
    fast = evaluate(model, targets, ks=(5, 10), keep_topk=True)
    # the plain path: one batch per chunk (no token budget), the full forward's last position
    monkeypatch.setattr(torch_recommender, "EVAL_TOKENS", 1 << 40)
    monkeypatch.setattr(type(model.encoder), "encode_last", None, raising=False)
    plain = evaluate(model, targets, ks=(5, 10), keep_topk=True)
    assert fast.metrics == plain.metrics
    np.testing.assert_array_equal(fast.topk, plain.topk)


def test_encoders_that_pad_to_max_len_are_budgeted_at_max_len(monkeypatch):
    """A window encoder runs max_len positions a row whatever the histories' lengths, so its
    scoring batches hold at most EVAL_TOKENS / max_len rows."""
    model = fitted(TVRec, {"max_len": 40})
    model.run_config = dataclasses.replace(model.run_config, eval_batch_size=64)
    assert model.encoder.pads_to_max_len
    targets = _long_histories(300, model.n_items, seed=4)
    monkeypatch.setattr(torch_recommender, "EVAL_TOKENS", 400)
    rows = []
    real = model.encoder.encode_last
    monkeypatch.setattr(
        model.encoder, "encode_last", lambda b: rows.append(len(b.items)) or real(b)
    )
    evaluate(model, targets, ks=(5,))
    assert sum(rows) == 300 and max(rows) <= 400 // 40
    rows.clear()  # budgeted by the histories' own lengths (2 .. 41), batches would be larger
    monkeypatch.setattr(type(model.encoder), "pads_to_max_len", False)
    evaluate(model, targets, ks=(5,))
    assert sum(rows) == 300 and max(rows) > 400 // 40
