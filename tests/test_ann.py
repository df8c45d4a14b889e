"""The approximate item index (seqrec.models.ann): filters stay exact, the index file is
checksummed like the rest of the artifact, and everything works without it."""

import json
import logging
import os
import shutil

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seqrec.cli.main import main
from seqrec.errors import ConfigError, DataError
from seqrec.models import ann
from seqrec.models.base import Recommender
from seqrec.models.factorization.pop import Pop, PopConfig
from seqrec.models.factorization.svd import PureSVD, PureSVDConfig
from seqrec.models.neural_config import settings as neural_settings
from seqrec.models.sasrec import SASRec, SASRecConfig
from seqrec.testing.synthetic import leave_last_out_small, markov_sequences

if os.environ.get("CI") == "true":  # the ann extra is installed in CI: never skip there
    import faiss  # noqa: F401
else:
    pytest.importorskip("faiss", reason="the ann extra (faiss-cpu) is not installed")

N_ITEMS = 60


@pytest.fixture(scope="module")
def data():
    return leave_last_out_small(markov_sequences(n_users=40, n_items=N_ITEMS, seed=3))


@pytest.fixture(scope="module")
def model(data):
    train, valid, _ = data
    cfg = neural_settings(
        SASRecConfig, dim=8, n_blocks=1, n_heads=1, max_len=10, epochs=1, batch_size=16
    )
    m = SASRec(cfg).fit(train, valid, progress=False)
    # a large over-fetch: every candidate list can hold the whole catalogue
    m.index = ann.ItemIndex.build(
        m.item_vectors(), ann.IndexParams(ef_search=4 * N_ITEMS, max_fetch=N_ITEMS)
    )
    return m


@pytest.fixture(scope="module")
def ivf_model(model):
    """The same model with an inverted file of 4 cells, every cell scanned (the large
    over-fetch of the graph's fixture)."""
    m = SASRec(model.settings)
    m.__dict__.update(model.__dict__)
    params = ann.IndexParams(kind="ivf", nlist=4, nprobe=4, max_fetch=N_ITEMS)
    m.index = ann.ItemIndex.build(m.item_vectors(), params, threads=1)
    assert m.index.params.kind == "ivf" and m.index.params.nprobe == 4
    return m


@pytest.fixture(scope="module")
def saved(model, tmp_path_factory):
    path = tmp_path_factory.mktemp("ann") / "sasrec"
    model.save(path)
    return path


def _same_ranking(got, want):
    """Same items and scores; two items may swap only where their scores tie (to rounding:
    the index computes the inner products in its own order)."""
    assert len(got.items) == len(want.items)
    np.testing.assert_allclose(got.scores, want.scores, rtol=1e-5, atol=1e-5)
    for i, (a, b) in enumerate(zip(got.items, want.items, strict=True)):
        if a != b:
            assert abs(got.scores[i] - want.scores[i]) < 1e-5 and b in got.items, (got, want)


@pytest.mark.parametrize("kind", ["hnsw", "ivf"])
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    users=st.lists(st.integers(0, 39), min_size=1, max_size=6),
    k=st.integers(1, 25),
    exclude_seen=st.booleans(),
    allow=st.one_of(st.none(), st.sets(st.integers(1, N_ITEMS), min_size=1, max_size=N_ITEMS)),
    deny=st.one_of(st.none(), st.sets(st.integers(1, N_ITEMS), max_size=40)),
)
def test_filters_are_exact_with_the_index(request, kind, data, users, k, exclude_seen, allow, deny):
    model = request.getfixturevalue("model" if kind == "hnsw" else "ivf_model")
    train = data[0]
    hist = [model.vocab.decode(train.items[train.offsets[u] : train.offsets[u + 1]]) for u in users]
    hist = [list(h) for h in hist]
    kw = dict(
        k=k,
        exclude_seen=exclude_seen,
        allow=None if allow is None else list(model.vocab.decode(np.array(sorted(allow)))),
        deny=None if deny is None else list(model.vocab.decode(np.array(sorted(deny)))),
    )
    got = model.recommend(hist, **kw)
    want = model.recommend(hist, exact=True, **kw)
    for g, w in zip(got, want, strict=True):
        assert w.ranking == "exact"
        _same_ranking(g, w)
        seen = set(hist[got.index(g)]) if exclude_seen else set()
        assert not seen & set(g.items)
        assert not set(kw["deny"] or []) & set(g.items)
        assert kw["allow"] is None or set(g.items) <= set(kw["allow"])


def test_the_index_answers_and_exact_forces_full_ranking(model):
    hist = [list(model.vocab.decode(np.array([1, 2, 3])))]
    assert model.recommend(hist, k=5)[0].ranking == "index"
    assert model.recommend(hist, k=5, exact=True)[0].ranking == "exact"
    assert model.recommend([[]], k=5)[0].fallback == "popularity"  # empty: popularity, exactly


def test_a_short_candidate_list_falls_back_to_exact_and_says_so(model, caplog):
    small = ann.ItemIndex(
        model.index.index, model.index.n_items, model.index.dim, ann.IndexParams(max_fetch=8)
    )
    m = SASRec(model.settings)
    m.__dict__.update({**model.__dict__, "index": small})
    hist = [list(model.vocab.decode(np.arange(1, 21)))]  # 20 seen items: over-fetch 25 > 8
    with caplog.at_level(logging.WARNING, logger="seqrec.models.base"):
        (rec,) = m.recommend(hist, k=5)
    assert rec.ranking == "exact"
    assert "ranked exactly" in caplog.text
    _same_ranking(rec, model.recommend(hist, k=5, exact=True)[0])


def test_saved_index_round_trips(saved, model):
    loaded = Recommender.load(saved)
    assert loaded.index is not None and loaded.index.n_items == N_ITEMS
    assert "index.npz" in json.loads((saved / "model.json").read_text())["files"]
    hist = [list(model.vocab.decode(np.array([4, 5, 6])))]
    assert loaded.recommend(hist, k=5)[0].items == model.recommend(hist, k=5)[0].items


def _copy(saved, tmp_path):
    dst = tmp_path / "copy"
    shutil.copytree(saved, dst)
    return dst


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_a_damaged_index_file_is_refused(saved, tmp_path, damage, capsys):
    art = _copy(saved, tmp_path)
    f = art / "index.npz"
    raw = bytearray(f.read_bytes())
    if damage == "flip":
        raw[len(raw) // 2] ^= 0xFF
    else:
        raw = raw[: len(raw) // 2]
    f.write_bytes(bytes(raw))
    with pytest.raises(DataError, match="index.npz"):
        Recommender.load(art)
    assert main(["recommend", str(art), "1"]) == 2
    assert "index.npz" in capsys.readouterr().err


def test_an_index_of_other_weights_is_refused(saved, tmp_path, data):
    art = _copy(saved, tmp_path)
    other = Recommender.load(art)
    with torch.no_grad():
        for p in other.encoder.parameters():
            p.add_(0.01)
    other.index = ann.ItemIndex.build(other.item_vectors())
    other.save(tmp_path / "other")
    shutil.copy(tmp_path / "other" / "index.npz", art / "index.npz")
    meta = json.loads((art / "model.json").read_text())
    meta["files"]["index.npz"] = json.loads((tmp_path / "other" / "model.json").read_text())[
        "files"
    ]["index.npz"]
    (art / "model.json").write_text(json.dumps(meta))
    with pytest.raises(DataError, match="other weights"):
        Recommender.load(art)


def test_an_artifact_without_an_index_works(model, tmp_path):
    m = SASRec(model.settings)
    m.__dict__.update({**model.__dict__, "index": None})
    m.save(tmp_path / "plain")
    assert not (tmp_path / "plain" / "index.npz").exists()
    loaded = Recommender.load(tmp_path / "plain")
    assert loaded.index is None
    assert loaded.recommend([[1, 2]], k=3)[0].ranking == "exact"


def test_an_index_without_the_library_ranks_exactly_and_says_so(saved, monkeypatch, caplog):
    monkeypatch.setattr(ann, "faiss_module", lambda: None)
    with caplog.at_level(logging.WARNING):
        loaded = Recommender.load(saved)
    assert loaded.index is None
    assert "faiss is not installed" in caplog.text
    assert loaded.recommend([[1, 2]], k=3)[0].ranking == "exact"


def test_cli_index_recommend_exact(model, tmp_path, capsys):
    m = SASRec(model.settings)
    m.__dict__.update({**model.__dict__, "index": None})
    path = tmp_path / "run"
    m.save(path)
    assert main(["index", str(path), "--check", "0", "--threads", "1"]) == 0
    assert "indexed 60 items" in capsys.readouterr().out
    assert Recommender.load(path).index is not None
    raw = str(model.vocab.decode(np.array([1]))[0])
    assert main(["recommend", str(path), raw, "-k", "3"]) == 0
    assert "item index" in capsys.readouterr().out
    assert main(["recommend", str(path), raw, "-k", "3", "--exact"]) == 0
    assert "item index" not in capsys.readouterr().out
    assert main(["index", str(path), "--remove"]) == 0
    assert Recommender.load(path).index is None


def test_index_accuracy_against_exact(model, data):
    from seqrec.evaluation.index import index_accuracy

    res = index_accuracy(model, data[2], 10, "history")
    assert res["targets"] == len(data[2]) and res["recall@10"] == pytest.approx(1.0)
    assert res["index"]["NDCG@10"] == pytest.approx(res["exact"]["NDCG@10"])


def test_factorization_models_index_or_say_why(data):
    train = data[0]
    svd = PureSVD(PureSVDConfig(rank=4)).fit(train)
    hist = train.select(np.arange(5))
    np.testing.assert_allclose(
        svd.query_vectors(hist) @ svd.item_vectors()[1:].T, svd.score(hist)[:, 1:], atol=1e-5
    )
    pop = Pop(PopConfig()).fit(train)
    with pytest.raises(ConfigError, match="cannot be indexed: its scores do not depend"):
        pop.item_vectors()


def test_bad_index_params_are_refused():
    with pytest.raises(ConfigError, match="ef_search"):
        ann.IndexParams(ef_search=0)


def _clustered(n_items=3000, n_queries=300, dim=16, seed=0):
    """A small clustered table with popularity-grown norms and a bias column (the shape of the
    benchmark's generated catalogue), queries near the clusters, 5 excluded items per row."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((30, dim))
    label = rng.integers(0, 30, n_items)
    pop = rng.pareto(1.2, n_items)
    table = np.zeros((n_items + 1, dim + 1), dtype=np.float32)
    table[1:, :dim] = (centres[label] + 0.6 * rng.standard_normal((n_items, dim))) * (
        1 + 0.3 * np.log1p(pop)
    )[:, None]
    table[1:, dim] = 0.5 * np.log1p(pop)
    queries = np.ones((n_queries, dim + 1), dtype=np.float32)
    queries[:, :dim] = centres[rng.integers(0, 30, n_queries)] + 0.5 * rng.standard_normal(
        (n_queries, dim)
    )
    seen = rng.integers(1, n_items + 1, (n_queries, 5))
    excluded = (np.repeat(np.arange(n_queries), 5), seen.reshape(-1))
    return table, queries, excluded


@pytest.mark.parametrize("kind", ["hnsw", "ivf"])
def test_calibration_reaches_its_target(kind):
    table, queries, excluded = _clustered()
    start = ann.IndexParams(kind=kind, m=8, ef_construction=40, ef_search=10, nlist=64, nprobe=1)
    index = ann.ItemIndex.build(table, start, threads=1)
    exact = ann.exact_top_k(table, queries, 10, excluded)
    before = ann.recall_at_k(ann.index_top_k(index, queries, 10, excluded)[0], exact)
    assert before < 0.98  # the starting effort is not enough: calibration has work to do
    cal = ann.calibrate(index, table, queries, excluded, k=10, target=0.98)
    assert cal["reached"] and cal["recall"] >= 0.98
    assert (
        cal["parameter"] == index.params.effort_name == ("nprobe" if kind == "ivf" else "ef_search")
    )
    assert index.params.effort == cal["value"] > start.effort
    ids, _, short = ann.index_top_k(index, queries, 10, excluded)
    assert not short.any()
    assert ann.recall_at_k(ids, exact) == pytest.approx(cal["recall"])
    # the smallest effort tried that meets the target is the one kept
    assert all(r < 0.98 for e, r in cal["tried"] if e < cal["value"])
    # stored with the index
    back = ann.load_index(index.to_arrays("x"), ann.index_meta(index.to_arrays("x"), "t"), "t")
    assert back.params.effort == cal["value"] and back.calibration == cal


def test_exact_top_k_is_the_filtered_ranking():
    table, queries, excluded = _clustered(n_items=200, n_queries=20)
    top = ann.exact_top_k(table, queries, 7, excluded, chunk_cells=1000)  # several chunks
    scores = queries @ table[1:].T
    scores[excluded[0], excluded[1] - 1] = -np.inf
    want = np.argsort(-scores, axis=1, kind="stable")[:, :7] + 1
    np.testing.assert_array_equal(top, want)


def test_the_index_returns_exact_inner_products():
    table, queries, excluded = _clustered(n_items=2000, n_queries=50)
    for kind in ("hnsw", "ivf"):
        index = ann.ItemIndex.build(table, ann.IndexParams(kind=kind), threads=1)
        ids, scores, short = ann.index_top_k(index, queries, 10, excluded)
        want = np.einsum("bkd,bd->bk", table[ids], queries)
        found = ids > 0  # a cell of a small inverted file may hold fewer (then the row is short)
        assert found[~short].all() and found.any()
        np.testing.assert_allclose(scores[found], want[found], rtol=1e-6, atol=1e-6)
        assert (scores[~found] == -np.inf).all()
        assert all((np.diff(row[f]) <= 0).all() for row, f in zip(scores, found, strict=True))


def test_auto_kind_follows_the_catalogue_size():
    assert ann.IndexParams().resolved(ann.IVF_FROM_ITEMS - 1).kind == "hnsw"
    big = ann.IndexParams().resolved(ann.IVF_FROM_ITEMS)
    assert big.kind == "ivf" and big.nlist == ann.auto_nlist(ann.IVF_FROM_ITEMS)
    assert (
        big.nprobe == big.nlist // 32
        and ann.IndexParams(nprobe=9999).resolved(10**6).nprobe == 4096
    )
    assert ann.auto_nlist(1_000_000) == 4096 and ann.auto_nlist(10) == 1
    with pytest.raises(ConfigError, match="kind"):
        ann.IndexParams(kind="pq")


def test_cli_index_calibrates_an_inverted_file(model, data, tmp_path, capsys):
    from seqrec.serving.histories import UserHistories

    train = data[0]
    m = SASRec(model.settings)
    m.__dict__.update({**model.__dict__, "index": None})
    m.user_histories = UserHistories(
        raw=np.array([f"u{i}" for i in range(len(train))]),
        offsets=train.offsets.astype(np.int64),
        items=train.items.astype(np.int64),
        removed=np.array([], dtype=str),
    )
    path = tmp_path / "run"
    m.save(path)
    args = ["index", str(path), "--kind", "ivf", "--nlist", "4", "--nprobe", "1"]
    assert main([*args, "--calibrate", "20", "--recall-target", "1.0", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert "calibrated nprobe on 20 stored histories" in out
    assert "recall@10 of exact ranking on 20 other stored histories" in out
    index = Recommender.load(path).index
    assert index.params.kind == "ivf" and index.calibration["reached"]
    assert index.params.nprobe == index.calibration["value"]


def test_items_the_graph_cannot_reach_are_scored_in_every_search():
    table, queries, excluded = _clustered(n_items=2000, n_queries=200)
    index = ann.ItemIndex.build(
        table, ann.IndexParams(kind="hnsw", m=4, ef_construction=8, ef_search=10), threads=1
    )
    exact = ann.exact_top_k(table, queries, 1, excluded)[:, 0]
    ids, _, _ = ann.index_top_k(index, queries, 10, excluded)
    missed = np.flatnonzero(ids[:, 0] != exact)
    assert len(missed)  # a weak graph misses some first choices
    index.always = np.unique(np.concatenate([index.always, exact[missed]]))
    ids, scores, _ = ann.index_top_k(index, queries, 10, excluded)
    np.testing.assert_array_equal(ids[:, 0], exact)  # now always candidates
    assert all(len(set(r[r > 0])) == (r > 0).sum() for r in ids)  # never twice
    arrays = index.to_arrays("x")
    back = ann.load_index(arrays, ann.index_meta(arrays, "t"), "t")
    np.testing.assert_array_equal(back.always, index.always)
    arrays["always"] = np.array([0, 5])
    with pytest.raises(DataError, match="unreachable"):
        ann.load_index(arrays, ann.index_meta(arrays, "t"), "t")


def test_unreachable_finds_the_items_a_self_search_misses():
    class Graph:  # a stand-in whose search finds every item but 3 and 7 first
        def search(self, x, k, params=None):
            ids = np.arange(len(x))[:, None] + self.start
            self.start += len(x)
            ids[np.isin(ids[:, 0], [3, 7])] = 0
            return None, np.repeat(ids, k, 1)

    graph = Graph()
    graph.start = 0
    vectors = np.zeros((10, 4), dtype=np.float32)
    got = ann._unreachable(faiss_lib(), graph, vectors, ann.IndexParams(kind="hnsw"))
    np.testing.assert_array_equal(got, [4, 8])  # internal ids are faiss ids + 1


def faiss_lib():
    return ann.require_faiss()
