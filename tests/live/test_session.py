"""Live answers (``run.session()``, :class:`seqrec.live.session.Live`) equal the model's answer
for the whole history: stored history + appended events, through the incremental encoder."""

import numpy as np
import pytest

import seqrec
from seqrec.errors import DataError
from seqrec.live.session import Live
from seqrec.live.store import Event, open_store


@pytest.fixture(scope="module")
def run(trained):
    return seqrec.load(trained[0])


def _stream(info, n, seed=0):
    rng = np.random.default_rng(seed)
    return [info["items"][int(i)] for i in rng.integers(0, len(info["items"]), n)]


def test_session_equals_recommend_on_the_whole_history(run, trained):
    _, info = trained
    user = info["users"][3]
    stored = list(run.model.vocab.decode(run.model.user_histories.internal([user])[0]))
    session = run.session(user)
    extra = _stream(info, 12)  # more than max_len (5): the window slides
    for n, item in enumerate(extra, 1):
        session.append(item, time=1_700_000_000 + n)
        got = session.recommend(k=5)
        want = run.recommend(history=stored + extra[:n], k=5)
        assert got.items == want.items
        np.testing.assert_allclose(got.scores, want.scores, rtol=1e-5, atol=1e-5)
    assert session.history == stored + extra
    # the same filters: allow / deny / include seen
    kw = {"allow": info["items"][:8], "deny": info["items"][:2]}
    got = session.recommend(k=3, exclude_seen=False, **kw)
    assert got.items == run.recommend(history=stored + extra, k=3, exclude_seen=False, **kw).items
    with pytest.raises(DataError, match="never saw"):
        session.recommend(allow=["no-such-item"])


def test_unknown_items_are_skipped_and_listed_unknown_users_refused(run, trained):
    _, info = trained
    session = run.session(history=[info["items"][0], "new-sku", info["items"][1]])
    rec = session.recommend(k=3)
    want = run.recommend(history=[info["items"][0], "new-sku", info["items"][1]], k=3)
    assert rec.items == want.items and rec.skipped_ids == ["new-sku"] == want.skipped_ids
    with pytest.raises(DataError, match="'nobody'"):
        run.session("nobody")
    with pytest.raises(DataError, match="'nobody'"):  # the same rule in run.recommend
        run.recommend(user="nobody")
    assert run.recommend(user="nobody", unknown_users="empty").fallback == "popularity"
    fresh = run.session("nobody", unknown_users="empty")
    assert fresh.recommend(k=2).fallback == "popularity"
    fresh.append(info["items"][4])
    assert fresh.recommend(k=2).items == run.recommend(history=[info["items"][4]], k=2).items


def test_an_evicted_state_is_rebuilt_from_the_store(run, trained, tmp_path):
    """A state cache of one user: every switch rebuilds from the store, with equal answers."""
    _, info = trained
    small = Live(run.model, str(tmp_path / "e.db"), capacity=1)
    big = Live(run.model, str(tmp_path / "e.db"), capacity=100)
    users = info["users"][:3]
    for step, item in enumerate(_stream(info, 18, seed=1)):
        user = users[step % 3]
        small.append([Event(user, item, 1_700_000_000 + step)])
        a = small.recommend([user], k=4)[0]
        b = big.recommend([user], k=4)[0]
        assert (a.items, a.scores) == (b.items, b.scores)
    assert len(small._cache) == 1 and small.misses >= 18
    assert big.hits >= 15  # the big cache absorbed the new events into kept states


def test_two_processes_over_one_store_see_each_other(run, trained, tmp_path):
    """Two Live objects (as two service processes would) over one SQLite file: events written
    through one are in the other's next answer, also for a state the other keeps in memory."""
    _, info = trained
    spec = str(tmp_path / "shared.db")
    a, b = Live(run.model, spec), Live(run.model, spec)
    user = info["users"][0]
    b.recommend([user], k=3)  # b now keeps a state for the user
    a.append([Event(user, info["items"][7], 1_700_000_000)])
    stored = list(run.model.vocab.decode(run.model.user_histories.internal([user])[0]))
    want = run.recommend(history=stored + [info["items"][7]], k=3).items
    assert b.recommend([user], k=3)[0].items == want
    assert open_store(spec).count(user) == 1


def test_a_model_that_reads_time_gets_the_events_times(tmp_path):
    """HSTU reads each history's times: the live answer equals recommend(history, times) with
    the stored times followed by the events' times; an event without a time is refused."""
    from seqrec.testing.synthetic import write_log_csv

    info = write_log_csv(tmp_path / "log.csv", n_users=30, n_items=20, time_unit="s")
    run = seqrec.train(
        str(tmp_path / "log.csv"),
        "hstu",
        data_options={"columns": "user=customer,item=sku,timestamp=event_ms"},
        epochs=1,
        dim=8,
        max_len=6,
        num_threads=1,
        progress=False,
    )
    assert run.model.reads_time
    user = info["users"][5]
    stored = list(run.model.vocab.decode(run.model.user_histories.internal([user])[0]))
    (stored_times,) = run.model.user_histories.times_of([user])
    session = run.session(user)
    items, times = _stream(info, 8, seed=2), [stored_times[-1] + 600 * (n + 1) for n in range(8)]
    for n, (item, t) in enumerate(zip(items, times, strict=True), 1):
        session.append(item, time=t)
        got = session.recommend(k=4)
        want = run.recommend(history=stored + items[:n], times=list(stored_times) + times[:n], k=4)
        assert got.items == want.items
        np.testing.assert_allclose(got.scores, want.scores, rtol=1e-5, atol=1e-5)
    with pytest.raises(DataError, match="reads time"):
        session.append(items[0])
