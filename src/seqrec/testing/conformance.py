"""Conformance suite every neural model passes (``TorchRecommender`` subclasses).

Use it either as plain functions::

    from seqrec.testing.conformance import run_conformance
    run_conformance(SASRec, {"dim": 16, "n_blocks": 1})

or as a pytest mixin (each check becomes its own test)::

    from seqrec.testing.conformance import ConformanceSuite

    class TestSASRecConformance(ConformanceSuite):
        model_cls = SASRec
        config_kwargs = {"dim": 16, "n_blocks": 1}
        bad_configs = [{"dim": 0}, {"n_heads": 3, "dim": 16}]

``config_kwargs`` are merged over :data:`TINY` (short sequences, 2 epochs, small batches). The
checks: output shapes and finiteness; no causal leakage (skipped for models whose class sets
``causal = False``, e.g. BERT4Rec); scores use exactly the history (nothing after it, and its
last item); an optional ``encode_last`` agrees
with ``forward``; left-padding invariance; batch-size
invariance; save/load keeps scores; seeded refit is deterministic; bad configs raise
``ConfigError``; ``recommend(exclude_seen=True)`` never returns history items; every loss runs;
the model learns an easy synthetic pattern; the incremental encoder of live sessions
(``seqrec.models.incremental``) gives ``model.score``'s scores after every event of a stream.
"""

from __future__ import annotations

import dataclasses
import tempfile
from typing import Any

import numpy as np
import torch

from seqrec.data.batching import SequenceBatch, inference_batch
from seqrec.errors import ConfigError, DataError
from seqrec.models.base import Recommender
from seqrec.testing.synthetic import leave_last_out_small, markov_sequences

TINY: dict[str, Any] = {
    "max_len": 12,
    "batch_size": 16,
    "epochs": 2,
    "patience": 0,
    "seed": 0,
    "lr": 3e-3,
    "n_negatives": 8,
    "eval_batch_size": 7,
    "num_threads": 1,
}
_CACHE: dict[Any, Any] = {}


def _data(n_users: int = 48, n_items: int = 25):
    key = ("data", n_users, n_items)
    if key not in _CACHE:
        seqs = markov_sequences(n_users=n_users, n_items=n_items, min_len=5, max_len=18, seed=1)
        _CACHE[key] = (seqs, *leave_last_out_small(seqs))
    return _CACHE[key]


def make_config(model_cls, config_kwargs: dict[str, Any], **over: Any):
    from seqrec.models.neural_config import settings

    return settings(model_cls.config_cls, **{**TINY, **config_kwargs, **over})


def fitted(model_cls, config_kwargs: dict[str, Any], **over: Any):
    """A model fitted on the synthetic data (cached per model class and config)."""
    key = (model_cls, tuple(sorted({**config_kwargs, **over}.items())))
    if key not in _CACHE:
        _, train, valid, _ = _data()
        model = model_cls(make_config(model_cls, config_kwargs, **over))
        _CACHE[key] = model.fit(train, valid, progress=False)
    return _CACHE[key]


def _times(items: np.ndarray) -> np.ndarray:
    """Hourly timestamps aligned to the right (the last column is the latest), 0 at PAD."""
    length = items.shape[1]
    times = 1_000_000 + 3600 * np.arange(length, dtype=np.int64)[None].repeat(len(items), 0)
    return times * (items != 0)


def _batch(items: np.ndarray, times: np.ndarray | None = None) -> SequenceBatch:
    times = torch.as_tensor(_times(items) if times is None else times, dtype=torch.long)
    items = torch.as_tensor(items, dtype=torch.long)
    return SequenceBatch(
        items=items,
        mask=items.ne(0),
        timestamps=times,
        query_times=times[:, -1] + 3600,
        users=torch.arange(len(items)),
    )


def _encoder(model_cls, config_kwargs, n_items: int = 25):
    cfg = make_config(model_cls, config_kwargs)
    torch.manual_seed(0)
    enc = model_cls.encoder_cls(cfg, n_items)
    enc.eval()
    return enc, cfg


def check_shapes(model_cls, config_kwargs: dict[str, Any]) -> None:
    model = fitted(model_cls, config_kwargs)
    _, _, _, test = _data()
    hist = test.histories()
    batch = inference_batch(hist, model.config.max_len)
    with torch.no_grad():
        hidden = model.encoder(batch)
    assert hidden.ndim == 3 and hidden.shape[:2] == batch.items.shape, hidden.shape
    assert torch.isfinite(hidden).all(), "non-finite hidden states"
    weight, bias = model.encoder.output_embeddings()
    assert weight.shape == (model.n_items + 1, hidden.shape[2]), weight.shape
    assert bias is None or bias.shape == (model.n_items + 1,)
    scores = model.score(hist)
    assert scores.shape == (len(hist), model.n_items + 1) and scores.dtype == np.float32
    assert np.all(scores[:, 0] == -np.inf) and np.isfinite(scores[:, 1:]).all()


def is_causal(model_cls) -> bool:
    """False for bidirectional models (``causal = False``): no causal-leakage check for them."""
    return bool(getattr(model_cls, "causal", True))


def check_no_causal_leakage(model_cls, config_kwargs: dict[str, Any], atol: float = 1e-5) -> None:
    """Changing item t+1 leaves outputs at <= t unchanged (only for ``causal`` models)."""
    if not is_causal(model_cls):
        return
    enc, cfg = _encoder(model_cls, config_kwargs)
    rng = np.random.default_rng(0)
    length = cfg.max_len
    items = rng.integers(1, enc.n_items + 1, size=(3, length))
    items[2, : length // 2] = 0  # one left-padded row
    with torch.no_grad():
        base = enc(_batch(items))
        for t in range(length // 2, length - 1):
            changed = items.copy()
            changed[:, t + 1] = changed[:, t + 1] % enc.n_items + 1
            out = enc(_batch(changed))
            diff = (out[:, : t + 1] - base[:, : t + 1]).abs().max().item()
            assert diff <= atol, f"position <= {t} changed by {diff} when item {t + 1} changed"
            assert (out[:, t + 1] - base[:, t + 1]).abs().max() > atol, (
                f"output at {t + 1} ignores its own input item"
            )


def check_last_position(model_cls, config_kwargs: dict[str, Any], atol: float = 1e-5) -> None:
    """An optional ``encode_last(batch) -> [B, D]`` must equal ``forward(batch)[:, -1]``."""
    enc, cfg = _encoder(model_cls, config_kwargs)
    if not hasattr(enc, "encode_last"):
        return
    items = np.random.default_rng(2).integers(1, enc.n_items + 1, size=(3, cfg.max_len))
    items[1, :4] = 0
    items[2, :-1] = 0
    with torch.no_grad():
        full, last = enc(_batch(items))[:, -1], enc.encode_last(_batch(items))
    assert last.shape == full.shape, (last.shape, full.shape)
    assert (last - full).abs().max().item() <= atol, "encode_last differs from forward[:, -1]"


def check_padding_invariance(model_cls, config_kwargs: dict[str, Any], atol: float = 1e-5) -> None:
    enc, cfg = _encoder(model_cls, config_kwargs)
    rng = np.random.default_rng(1)
    extra = min(3, cfg.max_len - 2)
    length = cfg.max_len - extra
    items = rng.integers(1, enc.n_items + 1, size=(4, length))
    items[1, :2] = 0
    items[2, : length - 1] = 0
    pad = np.zeros((4, extra), np.int64)
    padded = np.concatenate([pad, items], axis=1)
    padded_times = np.concatenate([pad, _times(items)], axis=1)  # same times on real positions
    with torch.no_grad():
        short = enc(_batch(items))
        long = enc(_batch(padded, padded_times))
    assert torch.isfinite(long).all(), "NaN/inf at padded positions"
    diff = (long[:, extra:][_batch(items).mask] - short[_batch(items).mask]).abs().max().item()
    assert diff <= atol, f"extra left padding changed real outputs by {diff}"


def check_batch_invariance(model_cls, config_kwargs: dict[str, Any], atol: float = 1e-5) -> None:
    model = fitted(model_cls, config_kwargs)
    _, _, _, test = _data()
    hist = test.histories()
    together = model.score(hist)
    alone = np.concatenate(
        [model.score(hist.select(np.array([i]))) for i in range(0, len(hist), 5)]
    )
    diff = np.abs(alone[:, 1:] - together[::5, 1:]).max()
    assert diff <= atol * max(1.0, np.abs(together[:, 1:]).max()), (
        f"batch composition changed scores by {diff}"
    )
    run = getattr(model, "run_config", None)
    if run is not None:  # small scoring chunks, each cut to its width
        # restored: the fitted model is cached and shared with the other checks
        model.run_config = dataclasses.replace(run, eval_batch_size=3)
        try:
            chunked = model.score(hist)
        finally:
            model.run_config = run
        diff = np.abs(chunked[:, 1:] - together[:, 1:]).max()
        assert diff <= atol * max(1.0, np.abs(together[:, 1:]).max()), (
            f"chunking changed scores by {diff}"
        )


def check_scores_use_only_history(model_cls, config_kwargs: dict[str, Any]) -> None:
    """Scores of a history ignore everything after it (the target and later items); for
    bidirectional models (``causal = False``) they must also depend on its most recent item.
    This replaces the causal check for those models, which have no causal structure to test:
    scoring must see exactly the history, nothing of the target. (The last-item half is not
    asked of causal models: MF, for one, scores by user and ignores the items.)"""
    from seqrec.data.sequences import Sequences, Targets

    model = fitted(model_cls, config_kwargs)
    seqs, _, valid, _ = _data()
    base = model.score(valid.histories())
    cut = np.zeros(len(seqs), np.int64)
    cut[valid.rows] = valid.cutoffs
    within = np.arange(len(seqs.items)) - np.repeat(seqs.offsets[:-1], seqs.lengths)
    cut_of = np.repeat(cut, seqs.lengths)

    def score_with(replace: np.ndarray) -> np.ndarray:
        items = seqs.items.copy()
        items[replace] = items[replace] % seqs.n_items + 1
        other = Sequences(
            offsets=seqs.offsets,
            items=items,
            n_items=seqs.n_items,
            timestamps=seqs.timestamps,
            users=seqs.users,
            vocab=seqs.vocab,
        )
        return model.score(Targets(other, valid.rows, valid.cutoffs, valid.items).histories())

    # the target and the item after it replaced: identical scores
    np.testing.assert_array_equal(
        score_with(within >= cut_of), base, err_msg="scores changed with items after the history"
    )
    if is_causal(model_cls):
        return
    # the most recent history item replaced: other scores
    new = score_with(within == cut_of - 1)
    assert not np.allclose(new[:, 1:], base[:, 1:]), "scores ignore the most recent history item"


def check_save_load(model_cls, config_kwargs: dict[str, Any]) -> None:
    model = fitted(model_cls, config_kwargs)
    _, _, _, test = _data()
    hist = test.histories()
    with tempfile.TemporaryDirectory() as tmp:
        model.save(tmp)
        loaded = Recommender.load(tmp)
    assert type(loaded) is type(model) and loaded.config == model.config
    assert loaded.settings == model.settings
    np.testing.assert_allclose(loaded.score(hist), model.score(hist), rtol=1e-6, atol=1e-6)


def check_seeded_refit(model_cls, config_kwargs: dict[str, Any]) -> None:
    _, train, valid, test = _data()
    a = model_cls(make_config(model_cls, config_kwargs, epochs=1)).fit(train, valid, progress=False)
    b = model_cls(make_config(model_cls, config_kwargs, epochs=1)).fit(train, valid, progress=False)
    hist = test.histories()
    np.testing.assert_array_equal(a.score(hist), b.score(hist))
    c = model_cls(make_config(model_cls, config_kwargs, epochs=1, seed=1)).fit(
        train, valid, progress=False
    )
    assert not np.array_equal(a.score(hist), c.score(hist)), "the seed has no effect"


def check_bad_configs(model_cls, config_kwargs: dict[str, Any], bad_configs=()) -> None:
    common = [
        {"max_len": 0},
        {"lr": -1.0},
        {"loss": "nope"},
        {"batch_size": -1},
        {"batch_size": 0, "batch_targets": 0},
        {"gbce_t": 2.0},
    ]
    for bad in [*common, *bad_configs]:
        try:
            make_config(model_cls, config_kwargs, **bad)
        except ConfigError:
            continue
        raise AssertionError(f"config {bad} did not raise ConfigError")


def check_exclude_seen(model_cls, config_kwargs: dict[str, Any]) -> None:
    model = fitted(model_cls, config_kwargs)
    seqs, *_ = _data()
    raw = [list(model.vocab.decode(seqs.row(r))) for r in range(6)]
    # a model trained with time reads the histories' times, and refuses histories without
    times = [seqs.row_times(r).tolist() for r in range(6)] if model.reads_time else None
    if model.reads_time:
        try:
            model.recommend(raw, k=5)
        except DataError as exc:
            assert "reads them when it scores" in str(exc), exc
        else:
            raise AssertionError(f"{model.name} reads time but scored histories without times")
    for hist, rec in zip(
        raw, model.recommend(raw, k=5, exclude_seen=True, times=times), strict=True
    ):
        assert len(rec.items) == 5 and not set(rec.items) & set(hist), (hist, rec.items)
        # raw ids come back as the Python values users compare and print, not numpy scalars
        assert all(type(i) in (int, str) for i in rec.items), [type(i) for i in rec.items]
    # without the filter, the top item of a history ending in i is mostly a seen item or not;
    # only check the call shape and ordering
    for rec in model.recommend(raw, k=5, exclude_seen=False, times=times):
        assert len(rec.items) == 5 and rec.scores == sorted(rec.scores, reverse=True)
    check_top_k(model)


def check_top_k(model) -> None:
    """``top_k`` (a model's fast path, if it has one) agrees with score + filter + top-k."""
    from seqrec.evaluation.ranking import apply_seen_filter, topk_items

    _, _, valid, _ = _data()
    hist = valid.histories()
    for seen_filter, window, k in (("history", None, 5), ("window", 3, model.n_items)):
        ids, vals = model.top_k(hist, k, seen_filter=seen_filter, window=window)
        scores = apply_seen_filter(model.score(hist), hist, seen_filter, window)
        want = topk_items(scores, k)
        assert ids.shape == (len(hist), min(k, model.n_items)) and (ids == want).all()
        np.testing.assert_allclose(vals, np.take_along_axis(scores, want, 1), rtol=1e-5, atol=1e-6)
        assert np.isneginf(vals[ids == 0]).all() and (vals[:, :-1] >= vals[:, 1:]).all()


def check_index_vectors(model, atol: float = 1e-5) -> None:
    """The item index's contract: ``query_vectors @ item_vectors.T`` is the model's score
    (bias folded in), so that an inner-product index over them ranks as ``score`` does."""
    _, _, valid, _ = _data()
    hist = valid.histories()
    items = model.item_vectors()
    queries = model.query_vectors(hist)
    assert items.shape[0] == model.n_items + 1 and queries.shape == (len(hist), items.shape[1])
    scores = model.score(hist)
    np.testing.assert_allclose(queries @ items[1:].T, scores[:, 1:], rtol=1e-4, atol=atol)


def check_all_losses(model_cls, config_kwargs: dict[str, Any]) -> None:
    _, train, valid, _ = _data()
    for loss in ("bce", "ce", "sampled_softmax", "gbce"):
        model = model_cls(make_config(model_cls, config_kwargs, loss=loss, epochs=1))
        model.fit(train, None, progress=False)
        assert model.training_log.global_step > 0
        assert np.isfinite(model.score(valid.histories())[:, 1:]).all(), loss


def check_learns(
    model_cls, config_kwargs: dict[str, Any], epochs: int = 15, min_ndcg: float = 0.3
) -> None:
    """On near-deterministic transitions the validation NDCG@10 must far exceed random."""
    model = fitted(model_cls, config_kwargs, epochs=epochs)
    best = model.training_log.best_metric
    assert best is not None and best >= min_ndcg, f"validation NDCG@10 {best} < {min_ndcg}"


def stream_parity(model, encoder, n_events: int = 200, seed: int = 0) -> float:
    """Largest ``|encoder.scores - model.score|`` over the prefixes of a random stream.

    The stream (``n_events`` items of the model's catalogue, times hours to days apart when the
    model reads time) starts with its first three events (``start``) and then appends one event
    at a time; after each, the encoder's scores are compared with ``model.score`` on the full
    history so far.
    """
    from seqrec.data.sequences import Sequences

    rng = np.random.default_rng(seed)
    items = rng.integers(1, model.n_items + 1, size=n_events)
    times = None
    if model.reads_time:
        times = 1_000_000_000 + np.cumsum(rng.integers(0, 3 * 86_400, size=n_events))
    state = encoder.start(items[:3], None if times is None else times[:3])
    worst = 0.0
    for t in range(3, n_events + 1):
        if t > 3:
            state = encoder.append(
                state, int(items[t - 1]), None if times is None else int(times[t - 1])
            )
        history = Sequences.from_lists(
            [items[:t].tolist()],
            n_items=model.n_items,
            timestamps=None if times is None else [times[:t].tolist()],
        )
        ref = model.score(history)[0]
        got = encoder.scores(state)
        assert got.shape == ref.shape and got.dtype == np.float32 and got[0] == -np.inf
        worst = max(worst, float(np.abs(got[1:] - ref[1:]).max()))
    return worst


def check_incremental_parity(
    model_cls, config_kwargs: dict[str, Any], atol: float = 1e-5, n_events: int = 200
) -> None:
    """The model's incremental encoder (``incremental_encoder``: its own, else re-encoding)
    gives ``model.score``'s scores after every event of a stream of ``n_events``: once within
    ``max_len`` (a model with ``max_len = n_events``) and once crossing it many times (the
    suite's ``max_len``, where the window slides)."""
    from seqrec.models.incremental import incremental_encoder

    for model in (
        fitted(model_cls, config_kwargs, max_len=n_events, epochs=1),
        fitted(model_cls, config_kwargs),
    ):
        encoder = incremental_encoder(model)
        worst = stream_parity(model, encoder, n_events)
        assert worst <= atol, (
            f"{type(encoder).__name__} ({encoder.kind}) differs from model.score by {worst} "
            f"(max_len {model.config.max_len}, {n_events} events)"
        )


CHECKS = (
    check_shapes,
    check_no_causal_leakage,
    check_last_position,
    check_padding_invariance,
    check_batch_invariance,
    check_scores_use_only_history,
    check_save_load,
    check_seeded_refit,
    check_exclude_seen,
    check_all_losses,
    check_learns,
    check_incremental_parity,
)


def run_conformance(model_cls, config_kwargs: dict[str, Any] | None = None, bad_configs=()) -> None:
    """Run every check; raises ``AssertionError`` on the first failure."""
    config_kwargs = config_kwargs or {}
    for check in CHECKS:
        check(model_cls, config_kwargs)
    check_bad_configs(model_cls, config_kwargs, bad_configs)


class ConformanceSuite:
    """pytest mixin: subclass as ``TestXxxConformance`` and set the class attributes."""

    model_cls: Any = None
    config_kwargs: dict[str, Any] = {}
    bad_configs: list[dict[str, Any]] = []
    atol: float = 1e-5
    learn_epochs: int = 15
    learn_min_ndcg: float = 0.3

    def test_shapes(self):
        check_shapes(self.model_cls, self.config_kwargs)

    def test_no_causal_leakage(self):
        if not is_causal(self.model_cls):
            import pytest

            pytest.skip(f"{self.model_cls.__name__} is bidirectional (causal = False)")
        check_no_causal_leakage(self.model_cls, self.config_kwargs, self.atol)

    def test_scores_use_only_history(self):
        check_scores_use_only_history(self.model_cls, self.config_kwargs)

    def test_last_position(self):
        check_last_position(self.model_cls, self.config_kwargs, self.atol)

    def test_padding_invariance(self):
        check_padding_invariance(self.model_cls, self.config_kwargs, self.atol)

    def test_batch_invariance(self):
        check_batch_invariance(self.model_cls, self.config_kwargs, self.atol)

    def test_save_load(self):
        check_save_load(self.model_cls, self.config_kwargs)

    def test_seeded_refit(self):
        check_seeded_refit(self.model_cls, self.config_kwargs)

    def test_bad_configs(self):
        check_bad_configs(self.model_cls, self.config_kwargs, self.bad_configs)

    def test_exclude_seen(self):
        check_exclude_seen(self.model_cls, self.config_kwargs)

    def test_all_losses(self):
        check_all_losses(self.model_cls, self.config_kwargs)

    def test_index_vectors(self):
        check_index_vectors(fitted(self.model_cls, self.config_kwargs), self.atol)

    def test_learns(self):
        check_learns(self.model_cls, self.config_kwargs, self.learn_epochs, self.learn_min_ndcg)

    def test_incremental_parity(self):
        check_incremental_parity(self.model_cls, self.config_kwargs, self.atol)
