"""Incremental encoders (seqrec.models.kv_cache): which configurations get which kind, the
sliding-window options, input errors, and that every registered model's parity is checked."""

from __future__ import annotations

import importlib
import pkgutil

import numpy as np
import pytest

from seqrec import registry
from seqrec.data.sequences import Sequences
from seqrec.errors import DataError
from seqrec.models.gru4rec import GRU4Rec
from seqrec.models.hstu import HSTU
from seqrec.models.incremental import ReEncode, incremental_encoder
from seqrec.models.kv_cache import SASRecCache
from seqrec.models.lrurec import LRURec
from seqrec.models.lsan import LSAN
from seqrec.models.sasrec import SASRec
from seqrec.models.torch_recommender import TorchRecommender
from seqrec.testing.conformance import ConformanceSuite, _data, fitted, stream_parity

SMALL = {"dim": 16, "n_heads": 2}
FROM_START = {**SMALL, "positions": "from_start"}


@pytest.mark.parametrize(
    ("model_cls", "kwargs", "kind"),
    [
        (SASRec, SMALL, "re-encode"),  # positions from the end: every event moves them all
        (SASRec, FROM_START, "kv-cache"),
        (HSTU, SMALL, "re-encode"),
        (HSTU, FROM_START, "kv-cache"),
        (HSTU, {**SMALL, "position_embedding": False}, "kv-cache"),
        (
            HSTU,
            {**FROM_START, "rab_time_query": "next", "allow_target_time": True},
            "re-encode",
        ),
        (LSAN, {**SMALL, "m1": 3}, "re-encode"),
        (LSAN, {**FROM_START, "m1": 3}, "kv-cache"),
        (LRURec, {"dim": 16}, "recurrent"),
        (GRU4Rec, {"dim": 16}, "recurrent"),
    ],
)
def test_kind_follows_the_configuration(model_cls, kwargs, kind):
    model = fitted(model_cls, kwargs, epochs=1)
    assert incremental_encoder(model).kind == kind


def _stream(n: int, n_items: int, seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).integers(1, n_items + 1, size=n)


def _score(model, items) -> np.ndarray:
    return model.score(Sequences.from_lists([list(items)], n_items=model.n_items))[0]


def test_periodic_slide_scores_the_window_it_keeps():
    """slide='periodic': between re-encodes the cache covers the newest max_len - stride to
    max_len events, and the scores are exactly model.score on those; one re-encode per
    stride + 1 events past max_len; different from the full history's scores (an
    approximation)."""
    model = fitted(SASRec, FROM_START, epochs=1)
    max_len, stride = model.config.max_len, 4
    encoder = model.incremental(slide="periodic", stride=stride)
    items = _stream(60, model.n_items)
    state = encoder.start(items[:3])
    differs = 0
    for t in range(3, len(items)):
        state = encoder.append(state, int(items[t]))
        window = state.items
        assert window == items[t + 1 - len(window) : t + 1].tolist()
        assert min(t + 1, max_len - stride) <= len(window) <= max_len
        got = encoder.scores(state)
        np.testing.assert_allclose(got[1:], _score(model, window)[1:], atol=1e-5)
        differs += not np.allclose(got[1:], _score(model, items[: t + 1])[1:], atol=1e-5)
    assert state.reencodes == -(-(len(items) - max_len) // (stride + 1))
    assert differs > 0


def test_exact_slide_reencodes_every_event_past_max_len():
    model = fitted(LRURec, {"dim": 16}, epochs=1)
    encoder = incremental_encoder(model)
    items = _stream(30, model.n_items)
    state = encoder.start(items[:5])
    for item in items[5:]:
        state = encoder.append(state, int(item))
    assert state.reencodes == len(items) - model.config.max_len
    assert state.items == items[-model.config.max_len :].tolist() and state.n_events == 30


def test_parity_check_catches_a_wrong_cache():
    """The conformance check can fail: a key/value cache forced on positions counted from the
    end (every new event moves every position) is not model.score."""
    model = fitted(SASRec, SMALL, epochs=1)
    assert stream_parity(model, SASRecCache(model), n_events=20) > 1e-3
    assert stream_parity(model, ReEncode(model), n_events=20) <= 1e-5


def test_empty_history_then_events():
    model = fitted(SASRec, FROM_START, epochs=1)
    encoder = incremental_encoder(model)
    state = encoder.start(np.array([], dtype=np.int64))
    pop = encoder.scores(state)
    assert pop[0] == -np.inf and np.array_equal(pop[1:], model.popularity[1:])
    for item in (3, 5, 7):
        state = encoder.append(state, item)
    np.testing.assert_allclose(encoder.scores(state)[1:], _score(model, [3, 5, 7])[1:], atol=1e-5)


@pytest.mark.parametrize(
    ("model_cls", "kwargs"),
    [
        (SASRec, FROM_START),
        (HSTU, FROM_START),
        (LRURec, {"dim": 16}),
        (GRU4Rec, {"dim": 16}),
    ],
)
def test_short_windows_built_by_steps_equal_a_prefill(model_cls, kwargs):
    """A window of at most ``step_start`` events is built by steps from an empty cache: the
    same scores as the batched prefill of the same window, and the state extends the same."""
    model = fitted(model_cls, kwargs, epochs=1)
    encoder = incremental_encoder(model)
    assert encoder.step_start >= 1 and encoder._empty_cache is not None
    items = _stream(8, model.n_items)
    times = 1_000_000_000 + 3_600 * np.arange(8) if model.reads_time else None
    for n in range(1, encoder.step_start + 2):
        t = None if times is None else times[:n]
        stepped = encoder.start(items[:n], t)
        encoder.step_start, kept = 0, encoder.step_start
        try:
            prefilled = encoder.start(items[:n], t)
        finally:
            encoder.step_start = kept
        for state in (stepped, prefilled):  # then one more event on each
            encoder.append(state, int(items[n]), None if times is None else int(times[n]))
        np.testing.assert_allclose(
            encoder.scores(stepped)[1:], encoder.scores(prefilled)[1:], atol=1e-5
        )
        assert stepped.items == prefilled.items and stepped.n_events == n + 1


def test_input_errors():
    timed = fitted(HSTU, FROM_START, epochs=1)
    assert timed.reads_time
    encoder = incremental_encoder(timed)
    with pytest.raises(DataError, match="reads time"):
        encoder.start(np.array([1, 2]))
    state = encoder.start(np.array([1, 2]), np.array([10, 20]))
    with pytest.raises(DataError, match="needs one"):
        encoder.append(state, 3)
    with pytest.raises(DataError, match="times for"):
        encoder.start(np.array([1, 2]), np.array([10]))
    model = fitted(SASRec, FROM_START, epochs=1)
    encoder = incremental_encoder(model)
    for bad in (0, model.n_items + 1):
        with pytest.raises(DataError, match="internal id"):
            encoder.start(np.array([1, bad]))
    with pytest.raises(DataError, match="stride"):
        model.incremental(slide="periodic", stride=model.config.max_len)
    with pytest.raises(DataError, match="slide"):
        model.incremental(slide="sometimes")


def _suites() -> list[type]:
    import tests.models as pkg

    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name.startswith("test_"):
            importlib.import_module(f"tests.models.{info.name}")
    found, todo = [], list(ConformanceSuite.__subclasses__())
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


@pytest.mark.parametrize("name", registry.model_names())
def test_every_registered_model_has_stream_parity(name):
    """Neural models: some conformance class of theirs runs ``test_incremental_parity``.
    The others (no torch encoder) re-encode; their 200-event stream is checked here."""
    config_cls, model_cls = registry.get_model(name)
    if issubclass(model_cls, TorchRecommender):
        covering = [
            s
            for s in _suites()
            if s.model_cls is model_cls and getattr(s, "test_incremental_parity", None)
        ]
        assert covering, f"no conformance class runs test_incremental_parity for {name}"
        return
    _, train, valid, _ = _data()
    model = model_cls(config_cls()).fit(train, valid)
    encoder = incremental_encoder(model)
    assert encoder.kind == "re-encode"
    assert stream_parity(model, encoder, n_events=200) <= 1e-5
