"""The conformance checks must catch broken encoders (a suite that cannot fail proves nothing)."""

import pytest
import torch

from seqrec.models.layers import causal_padding_mask
from seqrec.models.sasrec import SASRec, SASRecEncoder
from seqrec.testing import conformance as C

KW = {"dim": 8, "n_blocks": 1}


class _Leaky(SASRecEncoder):
    """Bidirectional attention: position t sees t+1."""

    def forward(self, batch):
        valid = batch.mask
        length = batch.items.shape[1]
        pos = torch.arange(self.config.max_len - length, self.config.max_len)
        x = (self.item_emb(batch.items) + self.pos_emb(pos)[None]) * valid[..., None]
        mask = valid[:, None, :].expand(-1, length, -1) | torch.eye(length, dtype=torch.bool)
        for block in self.blocks:
            x = block(x, mask, valid)
        return self.final_norm(x) * valid[..., None]


class _LeftPositions(SASRecEncoder):
    """Positions counted from the left: outputs depend on the amount of padding."""

    def forward(self, batch):
        valid = batch.mask
        length = batch.items.shape[1]
        x = (self.item_emb(batch.items) + self.pos_emb(torch.arange(length))[None]) * valid[
            ..., None
        ]
        mask = causal_padding_mask(valid)
        for block in self.blocks:
            x = block(x, mask, valid)
        return self.final_norm(x) * valid[..., None]


class LeakySASRec(SASRec):
    encoder_cls = _Leaky


class LeftPosSASRec(SASRec):
    encoder_cls = _LeftPositions


def test_leakage_is_detected():
    with pytest.raises(AssertionError, match="changed"):
        C.check_no_causal_leakage(LeakySASRec, KW)


def test_padding_dependence_is_detected():
    with pytest.raises(AssertionError, match="padding"):
        C.check_padding_invariance(LeftPosSASRec, KW)


def test_missing_config_validation_is_detected():
    with pytest.raises(AssertionError, match="did not raise"):
        C.check_bad_configs(SASRec, KW, bad_configs=[{"dim": 8}])  # a valid config


def test_scoring_that_drops_the_last_history_item_is_detected():
    """A classic BERT4Rec bug: the mask overwrites the last history item instead of following it."""
    from seqrec.data.batching import SequenceBatch
    from seqrec.models.bert4rec import BERT4Rec

    class Overwrites(BERT4Rec):
        def scoring_batch(self, histories, width, query_times):
            batch = super().scoring_batch(histories, width, query_times)
            items = batch.items[:, :-1].clone()
            items[:, -1] = self.n_items + 1
            return SequenceBatch(items=items, mask=items.ne(0))

    kw = {"dim": 8, "n_blocks": 1, "n_heads": 1, "epochs": 1}
    C.check_scores_use_only_history(BERT4Rec, kw)
    with pytest.raises(AssertionError, match="most recent"):
        C.check_scores_use_only_history(Overwrites, kw)


def test_batch_invariance_leaves_the_cached_model_as_the_other_checks_find_it():
    # every check reuses one fitted model per class and config: a check that changes it (its
    # scoring chunk size, here) would hand the later checks another model than they name
    model = C.fitted(SASRec, KW)
    before = model.config
    C.check_batch_invariance(SASRec, KW)
    assert C.fitted(SASRec, KW) is model and model.config == before
