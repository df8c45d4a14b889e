"""MF: conformance (order-free variant of the leakage check), user table, unknown users."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from seqrec.data.sequences import Sequences
from seqrec.errors import DataError
from seqrec.models.mf import MF, MFConfig, MFEncoder
from seqrec.models.neural_config import settings
from seqrec.registry import get_model
from seqrec.testing.conformance import TINY, ConformanceSuite, _batch, _data, fitted

SMALL = {"dim": 16, "dropout": 0.1}


class TestMFConformance(ConformanceSuite):
    model_cls = MF
    config_kwargs = SMALL
    bad_configs = [{"dropout": 1.5}, {"dim": 0}, {"init_std": 0.0}, {"item_bias": "yes"}]

    def test_no_causal_leakage(self):
        """MF has no sequence model: the suite's check that position t+1 reacts to its own item
        cannot hold. The stronger property holds instead: no output depends on any item, and
        every real position carries the user's factor."""
        torch.manual_seed(0)
        enc = MFEncoder(settings(MFConfig, **{**TINY, **SMALL}), n_items=25, n_users=3).eval()
        rng = np.random.default_rng(0)
        items = rng.integers(1, 26, size=(3, 12))
        items[2, :6] = 0
        other = rng.integers(1, 26, size=(3, 12)) * (items != 0)
        with torch.no_grad():
            a, b = enc(_batch(items)), enc(_batch(other))
        torch.testing.assert_close(a, b)
        torch.testing.assert_close(a[0, 5], enc.user_emb.weight[0])
        assert torch.all(a[2, :6] == 0)  # PAD positions


def test_registry():
    assert get_model("mf") == (MFConfig, MF)


def test_scores_are_user_factor_times_items_plus_bias():
    model = fitted(MF, SMALL)
    _, _, _, test = _data()
    hist = test.histories(np.arange(5))
    enc = model.encoder
    want = enc.user_emb.weight[hist.users] @ enc.item_emb.weight.T + enc.item_bias
    np.testing.assert_allclose(
        model.score(hist)[:, 1:], want.detach().numpy()[:, 1:], rtol=1e-5, atol=1e-5
    )
    # the history's content is irrelevant, its user id is what counts
    swapped = Sequences(hist.offsets, hist.items[::-1].copy(), hist.n_items, users=hist.users)
    np.testing.assert_array_equal(model.score(swapped), model.score(hist))


def test_unknown_user_falls_back_to_item_bias():
    model = fitted(MF, SMALL)
    bias = model.encoder.item_bias.detach().numpy()
    rows = [[1, 2, 3], [4]]
    no_ids = Sequences.from_lists(rows, n_items=model.n_items)
    unseen = Sequences.from_lists(rows, n_items=model.n_items, users=np.array([10_000, -5]))
    for seqs in (no_ids, unseen):
        np.testing.assert_allclose(model.score(seqs)[:, 1:], np.tile(bias[1:], (2, 1)), rtol=1e-6)
    assert np.std(bias[1:]) > 0  # the fallback is a real ranking, not all ties
    rec = model.recommend([["i1", "i2"]], k=3)[0]  # raw items: no user id
    order = [int(i) for i in np.argsort(-bias[1:], kind="stable") + 1 if i not in (1, 2)]
    assert rec.items == list(model.vocab.decode(np.array(order[:3])))


def test_fit_needs_user_ids():
    _, train, _, _ = _data()
    no_users = Sequences(train.offsets, train.items, train.n_items)
    with pytest.raises(DataError, match="user ids"):
        MF(settings(MFConfig, **{**TINY, **SMALL})).fit(no_users, progress=False)


def test_user_table_size_survives_save_load(tmp_path):
    model = fitted(MF, SMALL)
    model.save(tmp_path)
    loaded = MF.load(tmp_path)
    assert loaded.n_users == model.n_users == 48
    torch.testing.assert_close(loaded.encoder.user_emb.weight, model.encoder.user_emb.weight)


def test_checkpointed_fit_resumes_with_the_user_table(tmp_path):
    """The harness fits with a checkpoint directory and refits to resume: the user table is
    rebuilt at the same size before the checkpoint is loaded."""
    _, train, valid, test = _data()
    cfg = settings(MFConfig, **{**TINY, **SMALL})
    first = MF(cfg).fit(train, valid, progress=False, checkpoint_dir=tmp_path)
    again = MF(cfg).fit(train, valid, progress=False, checkpoint_dir=tmp_path)
    hist = test.histories()
    np.testing.assert_array_equal(again.score(hist), first.score(hist))
    assert again.n_users == 48
