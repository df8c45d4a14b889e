import numpy as np
import pytest
import torch

from seqrec.data.batching import SequenceBatch
from seqrec.errors import ConfigError
from seqrec.models.bert4rec import BERT4Rec, BERT4RecConfig, BERT4RecEncoder, cloze_mask
from seqrec.models.neural_config import settings
from seqrec.testing import conformance as C
from seqrec.testing.conformance import ConformanceSuite


class TestBERT4RecConformance(ConformanceSuite):
    model_cls = BERT4Rec
    config_kwargs = {"dim": 16, "n_blocks": 2, "n_heads": 2, "lr": 3e-3, "mask_prob": 0.3}
    bad_configs = [
        {"dim": 0},
        {"dim": 15, "n_heads": 2},
        {"mask_prob": 0.0},
        {"mask_prob": 1.5},
        {"cloze": "bert"},
        {"max_len": 1},
        {"positions": "middle"},
        {"mask_last_prob": -0.1},
        {"dropout": 1.0},
        {"init": "xavier"},
        {"output": "linear"},
        {"output": "tied", "head_norm": True},
    ]
    learn_epochs = 40


class TestBERT4RecLRURecVariant(ConformanceSuite):
    """The LRURec authors' masking (80/10/10, Bernoulli), positions from the end, head norm."""

    model_cls = BERT4Rec
    config_kwargs = {
        "dim": 16,
        "n_blocks": 1,
        "n_heads": 1,
        "lr": 3e-3,
        "mask_prob": 0.3,
        "cloze": "lrurec",
        "positions": "from_end",
        "head_norm": True,
    }
    learn_epochs = 30
    test_all_losses = None
    test_bad_configs = None
    test_seeded_refit = None
    test_exclude_seen = None


class TestBERT4RecTiedOutput(ConformanceSuite):
    """Scores h E^T without the output transform or bias (the Dross et al. BERT4Rec)."""

    model_cls = BERT4Rec
    config_kwargs = {
        "dim": 16,
        "n_blocks": 1,
        "n_heads": 1,
        "lr": 3e-3,
        "mask_prob": 0.3,
        "output": "tied",
    }
    learn_epochs = 30
    test_all_losses = None
    test_bad_configs = None
    test_seeded_refit = None
    test_exclude_seen = None


def test_tied_output_has_no_transform_and_scores_the_last_block():
    enc = BERT4RecEncoder(_cfg(output="tied", dropout=0.0, attn_dropout=0.0), n_items=9).eval()
    assert enc.head is None and enc.output_embeddings()[1] is None
    assert not any("head" in n or "out_bias" in n for n, _ in enc.named_parameters())
    items = torch.tensor([[0, 0, 0, 0, 0, 0, 3, 4, 5, 10]])
    captured = {}
    enc.blocks[-1].register_forward_hook(lambda m, i, o: captured.update(h=o))
    out = enc(SequenceBatch(items=items, mask=items.ne(0)))
    assert torch.allclose(
        out[0, 6:], captured["h"][0, 6:]
    )  # the last block's states, untransformed


def test_the_new_output_field_leaves_stored_identities_alone():
    """Records stored before ``output`` existed trained the transform head: they are the same
    run as today's default, and not the same run as the tied head."""
    from seqrec.config import experiment_from_tree
    from seqrec_lab.runner import compatible, identity, run_key
    from seqrec_lab.spec import RunSpec

    def ident(**model):
        exp = experiment_from_tree({"model": {"name": "bert4rec", **model}})
        return identity(RunSpec("r", "r", 0, exp, (), ""), "fp")

    today, tied = ident(), ident(output="tied")
    stored = {
        **today,
        "model_config": {k: v for k, v in today["model_config"].items() if k != "output"},
    }
    assert (
        today["model_config"]["output"] == "transform" and tied["model_config"]["output"] == "tied"
    )
    assert compatible(stored, today) and compatible(stored, today, budget=False)
    assert not compatible(stored, tied) and run_key(tied) != run_key(today)


def test_bidirectional_model_would_fail_the_causal_check_so_it_is_skipped():
    kw = {"dim": 8, "n_blocks": 1}
    claiming = type("Causal", (BERT4Rec,), {"causal": True})  # the same model, claiming causality
    with pytest.raises(AssertionError, match="changed"):
        C.check_no_causal_leakage(claiming, kw)
    C.check_no_causal_leakage(BERT4Rec, kw)  # skipped: causal = False


def _cfg(**kw):
    return settings(BERT4RecConfig, **{"max_len": 10, "dim": 8, **kw})


def test_official_cloze_masks_round_n_rho_positions_with_the_mask_token():
    rng = np.random.default_rng(0)
    items = np.zeros((400, 10), np.int64)
    lengths = rng.integers(1, 11, size=400)
    for r, n in enumerate(lengths):
        items[r, 10 - n :] = rng.integers(1, 51, size=n)
    inputs, labels = cloze_mask(items, rng, _cfg(mask_prob=0.4, mask_last_prob=0.0), 50)
    chosen = labels > 0
    assert np.array_equal(chosen.sum(1), np.maximum(1, np.floor(lengths * 0.4 + 0.5)))
    assert np.all(inputs[chosen] == 51) and np.array_equal(inputs[~chosen], items[~chosen])
    assert np.array_equal(labels[chosen], items[chosen]) and not chosen[items == 0].any()
    # every real position gets masked sometimes, not only the most recent ones
    assert chosen[:, 0][lengths == 10].any()


def test_official_cloze_last_item_samples():
    rng = np.random.default_rng(1)
    items = rng.integers(1, 30, size=(2000, 10))
    inputs, labels = cloze_mask(items, rng, _cfg(mask_prob=0.5, mask_last_prob=0.25), 30)
    last_only = (labels > 0).sum(1) == 1
    assert 0.2 < last_only.mean() < 0.3  # 5 of 10 masked otherwise: a single mask is last-only
    assert np.all(inputs[last_only, -1] == 31) and np.all(labels[last_only, :-1] == 0)


def test_lrurec_cloze_replaces_80_10_10_and_boosts_the_last_position():
    rng = np.random.default_rng(2)
    items = rng.integers(1, 1000, size=(4000, 20))
    inputs, labels = cloze_mask(items, rng, _cfg(max_len=20, mask_prob=0.2, cloze="lrurec"), 1000)
    chosen = labels > 0
    assert abs(chosen[:, :-1].mean() - 0.2) < 0.01
    assert abs(chosen[:, -1].mean() - 0.28) < 0.02  # rho + 0.1 (1 - rho)
    as_mask = (inputs == 1001)[chosen].mean()
    kept = (inputs == items)[chosen].mean()
    assert abs(as_mask - 0.8) < 0.02 and abs(kept - 0.1) < 0.02  # the rest: random items
    assert np.array_equal(inputs[~chosen], items[~chosen])


def test_masks_come_from_the_step_generator():
    items = np.random.default_rng(3).integers(1, 30, size=(16, 10))
    a = cloze_mask(items, np.random.default_rng(7), _cfg(), 30)
    b = cloze_mask(items, np.random.default_rng(7), _cfg(), 30)
    c = cloze_mask(items, np.random.default_rng(8), _cfg(), 30)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not np.array_equal(a[1], c[1])


def test_scoring_appends_the_mask_token_after_the_history():
    _, train, valid, _ = C._data()
    model = C.fitted(BERT4Rec, TestBERT4RecConformance.config_kwargs)
    hist = valid.histories()
    scores = model.score(hist)
    max_len = model.config.max_len
    rows = [list(h[-(max_len - 1) :]) + [model.n_items + 1] for h in hist]
    items = torch.tensor([[0] * (max_len - len(r)) + r for r in rows])
    with torch.no_grad():
        h = model.encoder(SequenceBatch(items=items, mask=items.ne(0)))[:, -1]
        ref = model.encoder.score(h).numpy()
    np.testing.assert_allclose(scores[:, 1:], ref[:, 1:], rtol=1e-5, atol=1e-5)
    # a long history keeps max_len - 1 items: the mask takes the last slot
    batch = model.scoring_batch(hist, max_len, None)
    assert batch.items.shape[1] == max_len and torch.all(batch.items[:, -1] == model.n_items + 1)


def test_training_batch_predicts_masked_items_of_the_training_window():
    _, train, _, _ = C._data()
    model = BERT4Rec(settings(BERT4RecConfig, **{**C.TINY, "dim": 8}))
    model._remember_catalogue(train)
    rows = np.arange(8)
    data = model.make_batch(train, rows, np.random.default_rng(0))
    b = data["batch"]
    assert b.items.shape == b.targets.shape == (8, C.TINY["max_len"])
    masked = b.targets > 0
    assert masked.any(1).all() and torch.all(b.items[masked] == train.n_items + 1)
    for r in rows:  # labels are the row's own items at their positions
        row = train.row(r)[-C.TINY["max_len"] :]
        got = b.targets[r, -len(row) :].numpy()
        assert np.all((got == 0) | (got == row))


def test_mask_row_is_not_a_candidate_and_pad_outputs_are_zero():
    enc = BERT4RecEncoder(_cfg(), n_items=9).eval()
    weight, bias = enc.output_embeddings()
    assert weight.shape == (10, 8) and bias.shape == (10,)
    items = torch.tensor([[0, 0, 0, 0, 0, 0, 3, 4, 5, 10]])
    out = enc(SequenceBatch(items=items, mask=items.ne(0)))
    assert torch.isfinite(out).all() and torch.all(out[0, :6] == 0)


def test_output_depends_on_later_items_bidirectionally():
    torch.manual_seed(0)
    enc = BERT4RecEncoder(_cfg(dropout=0.0, attn_dropout=0.0), n_items=9).eval()
    a = torch.tensor([[0, 0, 1, 2, 3, 4, 5, 6, 7, 10]])
    b = a.clone()
    b[0, -2] = 8
    out_a = enc(SequenceBatch(items=a, mask=a.ne(0)))
    out_b = enc(SequenceBatch(items=b, mask=b.ne(0)))
    assert not torch.allclose(out_a[0, 2], out_b[0, 2])  # position 2 sees position 8


def test_lrurec_init_leaves_the_tables_at_unit_scale_and_the_blocks_official():
    torch.manual_seed(0)
    official = BERT4RecEncoder(_cfg(dim=64, max_len=50), n_items=500)
    lrurec = BERT4RecEncoder(_cfg(dim=64, max_len=50, init="lrurec"), n_items=500)
    for enc, scale in ((official, 0.02), (lrurec, 1.0)):
        for table in (enc.item_emb.weight[1:], enc.pos_emb.weight):
            assert abs(table.std().item() - scale) < 0.15 * scale
        assert enc.item_emb.weight[0].abs().sum() == 0  # PAD stays zero
    # the Transformer blocks and the output transform keep the official truncated normal
    assert (
        lrurec.head.weight.abs().max() <= 0.04 and lrurec.blocks[0].fc1.weight.abs().max() <= 0.04
    )


def test_config_rejects_bad_values_with_the_value():
    with pytest.raises(ConfigError, match="mask_prob"):
        BERT4RecConfig(mask_prob=0.0)
    with pytest.raises(ConfigError, match="max_len"):
        BERT4RecConfig(max_len=1)


def test_recommend_on_raw_ids_excludes_history():
    model = C.fitted(BERT4Rec, TestBERT4RecConformance.config_kwargs)
    rec = model.recommend([["i1", "i2", "i3"]], k=3)[0]
    assert len(rec.items) == 3 and not {"i1", "i2", "i3"} & set(rec.items)


def test_resume_continues_exactly(tmp_path):
    """Masks come from the step's generator: 1 epoch + 1 resumed epoch == 2 epochs straight."""
    _, train, valid, test = C._data()
    kw = {**C.TINY, "dim": 8, "patience": 0, "cloze": "lrurec"}
    kw.pop("epochs")
    BERT4Rec(settings(BERT4RecConfig, **kw, epochs=1)).fit(
        train, valid, checkpoint_dir=tmp_path, progress=False
    )
    two = BERT4Rec(settings(BERT4RecConfig, **kw, epochs=2)).fit(
        train, valid, checkpoint_dir=tmp_path, progress=False
    )
    straight = BERT4Rec(settings(BERT4RecConfig, **kw, epochs=2)).fit(train, valid, progress=False)
    assert two.training_log.resumed_from_step
    hist = test.histories()
    np.testing.assert_array_equal(two.score(hist), straight.score(hist))
