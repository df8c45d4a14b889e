"""The live HTTP service (``POST /events``, ``/recommend`` for a user from their history now),
``seqrec recommend --events`` replay, ``seqrec events export`` -> ``seqrec train``, and the one
unknown-user rule over HTTP single and batch."""

import numpy as np
import polars as pl
import pytest

import seqrec
from seqrec.cli.main import main

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from seqrec.serving.service import create_app  # noqa: E402


def _stored(run, user):
    return list(run.model.vocab.decode(run.model.user_histories.internal([user])[0]))


def test_events_then_recommend_answers_from_the_history_now(trained, tmp_path):
    artifact, info = trained
    run = seqrec.load(artifact)
    client = TestClient(create_app(artifact, events=str(tmp_path / "e.db")))
    assert "POST /events" in client.get("/").json()["endpoints"]
    info_body = client.get("/info").json()
    assert info_body["incremental"] in ("recurrent", "kv-cache", "re-encode")
    assert info_body["events"]["store"].endswith("e.db")
    old, new = info["users"][2], "brand-new"
    items = info["items"]
    # one event, then a batch (a new user is created by their first event)
    assert client.post("/events", json={"user": old, "item": items[3], "time": 1}).json() == {
        "stored": 1,
        "duplicates": 0,
        "unknown_items": [],
    }
    batch = [{"user": new, "item": items[5]}, {"user": old, "item": "sku-x", "id": "e1"}]
    assert client.post("/events", json={"events": batch}).json()["unknown_items"] == ["sku-x"]
    again = client.post("/events", json={"events": batch[1:]}).json()
    assert again["duplicates"] == 1 and again["stored"] == 0
    body = client.post("/recommend", json={"user": old, "k": 4}).json()
    want = run.recommend(history=_stored(run, old) + [items[3], "sku-x"], k=4)
    assert body["items"] == want.items
    np.testing.assert_allclose(body["scores"], want.scores, rtol=1e-5, atol=1e-5)
    assert body["skipped_ids"] == [{"id": "sku-x", "reason": "never_seen"}]
    got = client.get("/recommend", params={"user": new, "k": "4"}).json()
    assert got["items"] == run.recommend(history=[items[5]], k=4).items
    results = client.post(
        "/recommend/batch",
        json={"requests": [{"user": new}, {"history": [items[5]]}, {"user": old}], "k": 4},
    ).json()["results"]
    assert [r["items"] for r in results] == [got["items"], got["items"], body["items"]]
    # bad events are a 422 naming the field
    resp = client.post("/events", json={"user": old, "itm": 3})
    assert resp.status_code == 422 and "unknown field 'itm'" in str(resp.json())
    assert client.post("/events", json={"user": old, "item": 3, "time": "soon"}).status_code == 422
    assert client.post("/events", json={"events": []}).status_code == 422


def test_without_a_store_events_are_a_404_that_says_how(trained):
    client = TestClient(create_app(trained[0]))
    resp = client.post("/events", json={"user": "a", "item": "b"})
    assert resp.status_code == 404 and "--events" in resp.json()["detail"]
    assert client.get("/info").json()["events"] is None
    assert "POST /events" not in client.get("/").json()["endpoints"]


@pytest.mark.parametrize("events", [False, True])
def test_unknown_users_http_single_and_batch_one_rule(trained, tmp_path, events):
    """HTTP single and batch, with or without an event store: an unknown user is a 422 naming
    it; "unknown_users": "empty" answers it with the popularity ranking, marked."""
    artifact, info = trained
    client = TestClient(create_app(artifact, events=str(tmp_path / "e.db") if events else None))
    single = client.post("/recommend", json={"user": "nobody", "k": 2})
    assert single.status_code == 422 and "'nobody'" in single.json()["detail"]
    many = client.post("/recommend/batch", json={"requests": [{"user": "nobody"}], "k": 2})
    assert many.status_code == 422 and "'nobody'" in many.json()["detail"]
    ok = client.post("/recommend", json={"user": "nobody", "k": 2, "unknown_users": "empty"})
    batch = client.post(
        "/recommend/batch",
        json={"requests": [{"user": "nobody"}], "k": 2, "unknown_users": "empty"},
    ).json()["results"][0]
    assert ok.json()["fallback"] == "popularity" == batch["fallback"]
    assert ok.json()["items"] == batch["items"]
    # unknown allow ids: an error in both
    deny = {"user": info["users"][0], "allow": ["never"], "k": 2}
    assert client.post("/recommend", json=deny).status_code == 422


def test_replay_events_file_equals_the_service(trained, tmp_path, capsys):
    artifact, info = trained
    items, users = info["items"], info["users"]
    rows = [(users[1], items[2], 100), ("newbie", items[4], 101), (users[1], items[6], 102)]
    pl.DataFrame(rows, schema=["user", "item", "timestamp"], orient="row").write_csv(
        tmp_path / "ev.csv"
    )
    client = TestClient(create_app(artifact, events=str(tmp_path / "e.db")))
    client.post(
        "/events",
        json={"events": [{"user": u, "item": i, "time": t} for u, i, t in rows]},
    )
    want = {
        u: client.post("/recommend", json={"user": u, "k": 3}).json()["items"]
        for u in (users[1], "newbie")
    }
    capsys.readouterr()
    assert main(["recommend", str(artifact), "--events", str(tmp_path / "ev.csv"), "-k", "3"]) == 0
    table = pl.read_csv(__import__("io").StringIO(capsys.readouterr().out))
    got = {u: table.filter(pl.col("user") == u)["item"].to_list() for u in (users[1], "newbie")}
    assert got == want
    assert (
        main(
            [
                "recommend",
                str(artifact),
                "--events",
                str(tmp_path / "ev.csv"),
                "--user",
                "newbie",
                "-k",
                "3",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "user newbie: 1 items with the events" in out and str(want["newbie"][0]) in out


def test_exported_events_train(trained, tmp_path, capsys):
    """Must-show 5: the log `seqrec events export` writes is a file `seqrec train` reads."""
    artifact, info = trained
    client = TestClient(create_app(artifact, events=str(tmp_path / "e.db")))
    rng = np.random.default_rng(0)
    evs = [
        {
            "user": f"live{u}",
            "item": info["items"][int(rng.integers(0, 20))],
            "time": 1_700_000_000 + 60 * n,
        }
        for u in range(12)
        for n in range(7)
    ]
    client.post("/events", json={"events": evs})
    out = tmp_path / "events.csv"
    assert main(["events", "export", str(tmp_path / "e.db"), "--output", str(out)]) == 0
    assert "wrote 84 events" in capsys.readouterr().out
    table = pl.read_csv(out)
    assert table.columns == ["user", "item", "timestamp"] and table.height == 84
    both = tmp_path / "all.parquet"
    assert (
        main(
            [
                "events",
                "export",
                str(tmp_path / "e.db"),
                "--output",
                str(both),
                "--artifact",
                str(artifact),
            ]
        )
        == 0
    )
    n_stored = len(seqrec.load(artifact).model.user_histories.items)
    assert pl.read_parquet(both).height == 84 + n_stored
    assert (
        main(
            [
                "train",
                str(both),
                "-m",
                "pop",
                "--out",
                str(tmp_path / "retrained"),
            ]
        )
        == 0
    )
    retrained = seqrec.load(tmp_path / "retrained")
    assert "live3" in retrained.model.user_histories  # the new users are in the training data
    assert retrained.recommend(user="live3", k=3).items
