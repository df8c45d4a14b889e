"""FPMC: conformance, MF + first-order transition term on the last item, unknown users."""

from __future__ import annotations

import numpy as np
import torch

from seqrec.data.batching import SequenceBatch
from seqrec.data.sequences import Sequences
from seqrec.models.fpmc import FPMC, FPMCConfig, FPMCEncoder
from seqrec.registry import get_model
from seqrec.testing.conformance import ConformanceSuite, _data, fitted

SMALL = {"dim": 16, "dropout": 0.1}


class TestFPMCConformance(ConformanceSuite):
    model_cls = FPMC
    config_kwargs = SMALL
    bad_configs = [{"dropout": 1.5}, {"dim": 0}, {"init_std": -1.0}]


def test_registry():
    assert get_model("fpmc") == (FPMCConfig, FPMC)


def _manual(enc: FPMCEncoder, user: int | None, last: int) -> torch.Tensor:
    mc = enc.item_last_emb.weight @ enc.last_item_emb.weight[last]  # <v_i^{I,L}, v_l^{L,I}>
    if user is None:
        return mc
    return enc.item_user_emb.weight @ enc.user_emb.weight[user] + mc  # + <v_u^{U,I}, v_i^{I,U}>


def test_scores_are_mf_plus_transition_from_the_last_item():
    model = fitted(FPMC, SMALL)
    enc = model.encoder
    _, _, _, test = _data()
    hist = test.histories(np.arange(6))
    scores = model.score(hist)
    for r in range(6):
        want = _manual(enc, int(hist.users[r]), int(hist.row(r)[-1])).detach().numpy()
        np.testing.assert_allclose(scores[r, 1:], want[1:], rtol=1e-5, atol=1e-5)


def test_transition_term_uses_only_the_last_item():
    torch.manual_seed(0)
    enc = FPMCEncoder(FPMCConfig(dim=8, max_len=6), n_items=20, n_users=2).eval()
    base = torch.tensor([[3, 5, 8, 2, 9, 4]])
    older = torch.tensor([[11, 1, 17, 6, 13, 4]])  # same last item, other history
    newer = torch.tensor([[3, 5, 8, 2, 9, 12]])  # other last item
    users = torch.tensor([1])

    def last(items):
        with torch.no_grad():
            return enc(SequenceBatch(items=items, mask=items.ne(0), users=users))[:, -1]

    torch.testing.assert_close(last(base), last(older))
    assert not torch.allclose(last(base), last(newer))


def test_unknown_user_keeps_only_the_markov_chain():
    model = fitted(FPMC, SMALL)
    hist = Sequences.from_lists([[3, 4, 5], [7]], n_items=model.n_items)  # no user ids
    scores = model.score(hist)
    for r, last in enumerate((5, 7)):
        want = _manual(model.encoder, None, last).detach().numpy()
        np.testing.assert_allclose(scores[r, 1:], want[1:], rtol=1e-5, atol=1e-5)
