"""LSAN: conformance (full model, ablations, variants), QR indexing, the causal lightweight
convolution, the ablation switches and the side information the model reads."""

import numpy as np
import pytest
import torch

from seqrec.data.batching import SequenceBatch
from seqrec.data.sequences import Sequences
from seqrec.data.vocab import ItemVocab
from seqrec.errors import DataError
from seqrec.models.lsan import LSAN, LSANConfig, LSANEncoder, qr_indices, qr_sizes
from seqrec.models.lsan_blocks import CausalLightConv, SelfAttentionBlock, TwinAttentionBlock
from seqrec.models.neural_config import settings
from seqrec.testing.conformance import TINY, ConformanceSuite, _data
from seqrec.testing.synthetic import leave_last_out_small, markov_sequences


class TestLSANConformance(ConformanceSuite):
    model_cls = LSAN
    config_kwargs = {"dim": 16, "n_heads": 2, "dropout": 0.1, "m1": 3}
    bad_configs = [
        {"dim": 0},
        {"m1": 0},
        {"dim": 15},
        {"n_heads": 3},
        {"categories": "brand"},
        {"time_slots": "day"},
        {"context_embedding": "hash"},
        {"max_categories": 1},
        {"l2": -1.0},
        {"twin_combine": "mean"},
        {"candidates": "context"},
        {"composition": "product"},
        {"composition": "max", "dynamic": False},
        {"positions": "from_left"},
    ]


class TestLSANPositionsFromStart(ConformanceSuite):
    """Positions counted from the oldest item of the window: the live sessions' key/value
    cache (attention keys / values and the convolution's inputs) applies."""

    model_cls = LSAN
    config_kwargs = {"dim": 16, "n_heads": 2, "dropout": 0.1, "m1": 3, "positions": "from_start"}
    test_all_losses = None
    test_bad_configs = None
    test_seeded_refit = None
    test_exclude_seen = None
    test_learns = None


class TestLSANMeanCandidatesConformance(ConformanceSuite):
    """Context-free candidates (``candidates='mean'``, the first default) conform."""

    model_cls = LSAN
    config_kwargs = {"dim": 16, "n_heads": 2, "dropout": 0.1, "m1": 3, "candidates": "mean"}
    test_bad_configs = None


class TestLSANProductConformance(ConformanceSuite):
    """Shi et al.'s product composition (no dynamic weights) with input-pipeline candidates."""

    model_cls = LSAN
    config_kwargs = {
        "dim": 16,
        "n_heads": 2,
        "dropout": 0.1,
        "m1": 2,
        "dynamic": False,
        "composition": "product",
        "candidates": "input",
    }
    test_bad_configs = None
    test_seeded_refit = None


class TestLSANAblationsConformance(ConformanceSuite):
    """The three ablations together, plus the 'sum' context and the fallbacks, still conform."""

    model_cls = LSAN
    config_kwargs = {
        "dim": 16,
        "dynamic": False,
        "twin": False,
        "time_slots": "none",
        "categories": "none",
        "context_embedding": "sum",
        "dropout": 0.1,
    }
    test_all_losses = None
    test_bad_configs = None
    test_seeded_refit = None


class TestLSANSumCombineConformance(ConformanceSuite):
    model_cls = LSAN
    config_kwargs = {
        "dim": 16,
        "twin_combine": "sum",
        "context_embedding": "sum",
        "n_tables": 3,
        "m1": 2,
        "n_layers": 2,
    }
    test_all_losses = None
    test_bad_configs = None
    test_seeded_refit = None
    test_exclude_seen = None


# --- quotient-remainder indexing ---------------------------------------------------------------
@pytest.mark.parametrize(
    "n_items,m1,n_tables",
    [(25, 2, 2), (25, 3, 2), (12101, 2, 2), (12101, 4, 2), (1000, 3, 3), (7, 7, 2), (10, 1, 1)],
)
def test_qr_indices_give_every_item_a_distinct_combination(n_items, m1, n_tables):
    sizes = qr_sizes(n_items, m1, n_tables)
    assert sizes[:-1] == [m1] * (n_tables - 1) and np.prod(sizes) >= n_items
    assert np.prod(sizes[:-1]) * (sizes[-1] - 1) < n_items  # the last table is not oversized
    idx = torch.stack(qr_indices(torch.arange(1, n_items + 1), sizes), 1).numpy()
    assert (idx >= 0).all() and (idx < np.array(sizes)).all()
    assert len({tuple(r) for r in idx}) == n_items


def test_qr_two_tables_are_remainder_and_quotient():
    idx = qr_indices(torch.tensor([1, 2, 3, 4, 7]), [2, 4])
    assert idx[0].tolist() == [0, 1, 0, 1, 0] and idx[1].tolist() == [0, 0, 1, 1, 3]


def test_lsan_parameter_count_shrinks_with_m1():
    counts = [
        sum(p.numel() for p in LSANEncoder(LSANConfig(m1=m), 12101).tables.parameters())
        for m in (1, 2, 3, 4)
    ]
    assert counts == [(1 + 12101) * 128, (2 + 6051) * 128, (3 + 4034) * 128, (4 + 3026) * 128]


# --- twin attention ------------------------------------------------------------------------------
def test_causal_light_conv_sees_exactly_the_last_kernel_positions():
    torch.manual_seed(0)
    conv = CausalLightConv(dim=4, n_heads=2, kernel_size=5)
    with torch.no_grad():
        conv.weight.normal_()
    x = torch.randn(1, 12, 4)
    base = conv(x)
    for t in range(12):
        changed = x.clone()
        changed[:, t] += 1.0
        diff = (conv(changed) - base).abs().amax(-1)[0]
        affected = torch.nonzero(diff > 1e-6).flatten().tolist()
        assert affected == list(range(t, min(t + 5, 12))), (t, affected)  # no leak to < t


def test_light_conv_kernels_are_shared_per_head_and_normalised():
    conv = CausalLightConv(dim=4, n_heads=2, kernel_size=3)
    with torch.no_grad():
        conv.weight.copy_(torch.tensor([[0.0, 0.0, 10.0], [10.0, 0.0, 0.0]]))
    x = torch.arange(5.0)[None, :, None].repeat(1, 1, 4)  # value t at position t, all channels
    y = conv(x)[0]
    # head 0 (channels 0, 1) ~ the current position, head 1 (channels 2, 3) ~ two steps back
    assert torch.allclose(y[:, 0], y[:, 1]) and torch.allclose(y[:, 2], y[:, 3])
    assert torch.allclose(y[4, 0], torch.tensor(4.0), atol=1e-3)
    assert torch.allclose(y[4, 2], torch.tensor(2.0), atol=1e-3)


# --- ablation switches ---------------------------------------------------------------------------
def _enc(**kw):
    torch.manual_seed(0)
    cats = np.array([0] + [(i % 3) + 1 for i in range(20)])
    return LSANEncoder(settings(LSANConfig, max_len=8, dim=16, dropout=0.0, **kw), 20, cats).eval()


def _batch(items, hours=None):
    items = torch.as_tensor(items)
    times = None if hours is None else torch.as_tensor(hours) * 3600 + 7 * 86400
    return SequenceBatch(items=items, mask=items.ne(0), timestamps=times)


def test_ablation_switches_change_the_model():
    full = _enc()
    names = {n for n, _ in full.named_parameters()}
    assert any(n.startswith("att_") for n in names)
    assert isinstance(full.layers[0], TwinAttentionBlock)
    no_dyn = _enc(dynamic=False)
    assert not any(n.startswith("att_") for n, _ in no_dyn.named_parameters())
    assert isinstance(_enc(twin=False).layers[0], SelfAttentionBlock)
    assert full.context.num_embeddings == 4 * 3 * 24  # (3 classes + pad) x 3 x 24 hours
    assert _enc(time_slots="none").context.num_embeddings == 12
    items = [[0, 3, 5, 7, 2, 9, 11, 4]]
    hours = [[0, 1, 5, 9, 13, 17, 20, 23]]
    shifted = [[0, 2, 6, 10, 14, 18, 21, 22]]
    with torch.no_grad():
        # the hour slot matters unless it is switched off
        assert not torch.allclose(full(_batch(items, hours)), full(_batch(items, shifted)))
        off = _enc(time_slots="none")
        assert torch.allclose(off(_batch(items, hours)), off(_batch(items, shifted)))
        # context-free candidates: without dynamic weighting the plain sum of the base
        # embeddings, with it their mean (uniform weights)
        ids = torch.tensor([3, 5])
        no_dyn_mean, full_mean = _enc(dynamic=False, candidates="mean"), _enc(candidates="mean")
        assert torch.allclose(
            no_dyn_mean.output_embeddings()[0][ids], no_dyn_mean.base_embeddings(ids).sum(-2)
        )
        assert torch.allclose(
            full_mean.output_embeddings()[0][ids], full_mean.base_embeddings(ids).mean(-2)
        )
        # plain attention and twin attention are different functions of the same embeddings
        plain = _enc(twin=False)
        assert not torch.allclose(plain(_batch(items, hours)), full(_batch(items, hours)))


def test_categories_enter_the_context():
    enc = _enc()
    items = [[0, 3, 5, 7, 2, 9, 11, 4]]
    hours = [[0, 1, 5, 9, 13, 17, 20, 23]]
    with torch.no_grad():
        before = enc(_batch(items, hours))
        enc.category_of[5] = enc.category_of[5] % 3 + 1  # item at position 2
        after = enc(_batch(items, hours))
    changed = (after - before).abs().amax(-1)[0] > 1e-6
    assert not changed[:2].any() and changed[2:].all()  # from its own position on


def test_missing_timestamps_average_the_context_over_the_hours():
    for mode in ("tuple", "sum"):
        enc = _enc(context_embedding=mode)
        items = torch.tensor([[0, 3, 5, 7]])
        with torch.no_grad():
            avg = enc.context_vectors(items, None)
            each = torch.stack(
                [enc.context_vectors(items, torch.full_like(items, h * 3600)) for h in range(24)]
            ).mean(0)
        assert torch.allclose(avg, each, atol=1e-6), mode


def test_l2_term_is_added_to_the_loss():
    _, train, valid, _ = _data()
    cfg = dict(TINY, dim=16, epochs=1, time_slots="none")
    model = LSAN(settings(LSANConfig, **cfg, l2=0.0)).fit(train, None, progress=False)
    data = model.make_batch(train, np.arange(8), np.random.default_rng(0))
    plain = model.compute_loss(data).item()
    model.config = settings(LSANConfig, **cfg, l2=1e-2)
    penalty = 0.5 * 1e-2 * sum(p.pow(2).sum().item() for p in model.encoder.parameters())
    assert model.compute_loss(data).item() == pytest.approx(plain + penalty, rel=1e-5)


# --- side information ------------------------------------------------------------------------
def test_fit_refuses_missing_side_information():
    seqs = markov_sequences(n_users=10, n_items=12, seed=0)
    train, valid, _ = leave_last_out_small(seqs)
    no_attr = Sequences(
        train.offsets,
        train.items,
        train.n_items,
        train.timestamps,
        vocab=ItemVocab(train.vocab.raw),
    )
    with pytest.raises(DataError, match=r"categories='none'.*--set model.categories=none") as err:
        LSAN(settings(LSANConfig, **TINY, dim=16)).fit(no_attr, None, progress=False)
    assert "--set data.item_file=" in str(err.value)  # the CLI ways out, not only Python's
    no_time = Sequences(
        train.offsets,
        train.items,
        train.n_items,
        train.timestamps,
        vocab=train.vocab,
        has_time=False,
    )
    with pytest.raises(DataError, match=r"time_slots='none'.*--set model.time_slots=none"):
        LSAN(settings(LSANConfig, **TINY, dim=16)).fit(no_time, None, progress=False)
    fitted = LSAN(settings(LSANConfig, **TINY, dim=16, time_slots="none", categories="none"))
    fitted.fit(no_time, None, progress=False)  # the explicit fallbacks run
    assert (fitted.encoder.category_of[1:] == 1).all() and fitted.encoder.n_slots == 1


def test_fit_reads_the_categories_of_the_training_data():
    _, train, _, _ = _data()
    model = LSAN(settings(LSANConfig, **dict(TINY, epochs=1), dim=16)).fit(
        train, None, progress=False
    )
    expected = np.concatenate([[0], np.arange(train.n_items) % 4 + 2])  # classes 2..5
    # four equally widespread categories: class by decreasing count, ties by attribute id
    assert model.encoder.category_of.tolist() == expected.tolist()


def test_candidate_cache_follows_the_weights():
    enc = _enc(candidates="mean")
    with torch.no_grad():
        first = enc.output_embeddings()[0]
        assert enc.output_embeddings()[0] is first  # cached while nothing changes
        enc.tables[1].weight[3] += 1.0  # what an optimizer step does: the version changes
        second = enc.output_embeddings()[0]
    assert second is not first and not torch.allclose(second[4:10], first[4:10])
    ids = torch.arange(21)
    assert torch.allclose(second, enc.base_embeddings(ids).mean(-2) * (ids > 0)[:, None])
    w = enc.output_embeddings()[0]  # with gradients: composed afresh, differentiable
    assert w.requires_grad and enc._candidates[1] is second
    uncached = _enc(cache_candidates=False)
    with torch.no_grad():
        uncached.output_embeddings()
    assert uncached._candidates is None


def test_input_candidates_use_the_category_and_the_fusion():
    """``candidates='input'``: a candidate's vector is the input pipeline's output under the
    context (padding label, own category, slots averaged), so it moves with the candidate's
    category and with the fusion MLP, and QR partners no longer differ by one fixed offset."""
    enc = _enc(candidates="input")
    ids = torch.arange(1, 21)
    with torch.no_grad():
        w = enc.output_embeddings()[0]
        assert w[0].abs().max() == 0  # PAD row
        cur = enc.category_of[ids]
        expected = enc.compose(
            enc.base_embeddings(ids), enc.tuple_context(torch.zeros_like(cur), cur, None)
        )
        assert torch.allclose(w[1:], expected, atol=1e-6)
        # partners (j, j + 1 with j even share the last table's row): with the mean their
        # difference is the same vector for every pair; through the input pipeline it is not
        mean = _enc(candidates="mean").output_embeddings()[0]
        diffs_mean = mean[2:21:2] - mean[1:20:2]
        diffs_input = w[2:21:2] - w[1:20:2]
        assert torch.allclose(diffs_mean, diffs_mean[:1].expand_as(diffs_mean), atol=1e-6)
        assert not torch.allclose(diffs_input, diffs_input[:1].expand_as(diffs_input), atol=1e-3)
        # the category is read: changing it changes that candidate's vector only
        enc.category_of[7] = enc.category_of[7] % 3 + 1
        moved = (enc.output_embeddings()[0] - w).abs().amax(-1) > 1e-6
    assert moved.tolist() == [i == 7 for i in range(21)]


def test_product_composition_multiplies_the_base_rows():
    enc = _enc(dynamic=False, composition="product", candidates="mean")
    ids = torch.arange(1, 21)
    with torch.no_grad():
        base = enc.base_embeddings(ids)
        assert torch.allclose(enc.output_embeddings()[0][1:], base[:, 0] * base[:, 1])
        # the small table starts near 1: the product starts as the large table's row
        assert (enc.tables[0].weight - 1).abs().max() < 0.2
