"""The event stores (SQLite and Redis) keep every appended event once, in order, per user and
in the whole log, across a reopen."""

import pytest

from seqrec.errors import ConfigError, DataError
from seqrec.live.store import Event, SQLiteStore, make_event, open_store


@pytest.fixture(params=["sqlite", "redis"])
def spec(request, tmp_path):
    if request.param == "sqlite":
        return str(tmp_path / "events.db")
    return request.getfixturevalue("redis_url")


def test_append_history_count_and_log(spec):
    store = open_store(spec)
    a = [Event("u1", "i1", 10), Event("u2", "i2", 11), Event("u1", "i3", 12, "e3")]
    assert store.append(a) == [True, True, True]
    assert store.append([Event("u1", "i4", 13, "e4"), Event("u1", "i3", 12, "e3")]) == [
        True,
        False,  # the same client id: a re-sent event is stored once
    ]
    assert store.count("u1") == 3 and store.count("u2") == 1 and store.count("nobody") == 0
    assert [e.item for e in store.history("u1")] == ["i1", "i3", "i4"]
    assert [e.item for e in store.history("u1", 2)] == ["i4"]
    assert store.history("u1")[1] == Event("u1", "i3", 12, "e3")
    assert [(e.user, e.item) for e in store.events()] == [
        ("u1", "i1"),
        ("u2", "i2"),
        ("u1", "i3"),
        ("u1", "i4"),
    ]
    store.close()
    again = open_store(spec)  # what was acknowledged is there after a reopen
    assert [e.item for e in again.history("u1")] == ["i1", "i3", "i4"]
    assert again.append([Event("u1", "i3", 12, "e3")]) == [False]
    again.close()


def test_sqlite_is_wal_with_full_sync(tmp_path):
    store = SQLiteStore(tmp_path / "e.db")
    conn = store._conn()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL


def test_bad_stores_and_events_are_named(tmp_path):
    with pytest.raises(ConfigError, match="redis://"):
        open_store("http://example.com/x")
    with pytest.raises(ConfigError, match="does not exist"):
        open_store(tmp_path / "missing" / "e.db")
    with pytest.raises(DataError, match="item"):
        make_event("u", "")
    with pytest.raises(DataError, match="neither Unix seconds nor an ISO date"):
        make_event("u", "i", "yesterday")
    assert make_event(7, 8, "2021-01-01T00:00:00Z").time == 1_609_459_200
    assert make_event("u", "i", now=5) == Event("u", "i", 5)


def test_redis_refuses_a_server_that_does_not_fsync_every_write(redis_url):
    import redis

    client = redis.Redis.from_url(redis_url.split("?")[0])
    client.config_set("appendfsync", "everysec")
    try:
        with pytest.raises(ConfigError, match="appendfsync always"):
            open_store(redis_url)
        open_store(redis_url + "&durable=0").close()  # accepted when asked
    finally:
        client.config_set("appendfsync", "always")


def test_concurrent_appends_are_all_stored_once_in_per_user_order(spec):
    """Threads appending at once (the service's thread pool): group commits lose nothing,
    double nothing, and keep each thread's order within a user."""
    import threading

    store = open_store(spec)

    def write(t: int) -> None:
        for n in range(40):
            store.append([Event(f"u{t % 3}", f"t{t}-{n}", n, f"id-{t}-{n}")])

    threads = [threading.Thread(target=write, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    log = [e.id for e in store.events()]
    assert len(log) == len(set(log)) == 320
    for u in range(3):
        items = [e.item for e in store.history(f"u{u}")]
        assert store.count(f"u{u}") == len(items)
        for t in range(u, 8, 3):  # each writer's events in its order
            mine = [i for i in items if i.startswith(f"t{t}-")]
            assert mine == [f"t{t}-{n}" for n in range(40)]
    store.close()
