"""The live service's fast path (seqrec.serving.fast_path) answers exactly what the FastAPI
endpoints answer; the writer thread (seqrec.live.writer) answers only after the commit, groups
concurrent appends and passes the store's errors on."""

import asyncio
import threading

import numpy as np
import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from seqrec.errors import DataError  # noqa: E402
from seqrec.live.store import make_event  # noqa: E402
from seqrec.live.writer import Writer  # noqa: E402
from seqrec.serving.service import create_app  # noqa: E402


def _requests(info):
    users, items = info["users"], info["items"]
    ev = "/events"
    rec = "/recommend"
    return [
        # answered by the fast path
        (ev, {"user": users[0], "item": items[1], "time": 100}),
        (ev, {"user": users[0], "item": items[2], "time": "2024-01-02T03:04:05Z", "id": "a1"}),
        (ev, {"user": users[0], "item": items[2], "time": 101, "id": "a1"}),  # duplicate id
        (ev, {"user": "new-1", "item": items[3], "time": 102, "id": None}),
        (ev, {"user": 12345, "item": "sku-unknown", "time": 103}),
        (rec, {"user": users[0], "k": 4}),
        (rec, {"user": "new-1"}),
        (rec, {"user": 12345, "k": 3, "exclude_seen": False}),
        (rec, {"user": users[0], "k": 20, "exclude_seen": False}),
        (rec, {"user": "nobody", "k": 2}),  # 422 unknown user
        (rec, {"user": "nobody", "k": 2, "unknown_users": "empty"}),
        # handed to the endpoint (which validates them)
        (ev, {"events": [{"user": users[1], "item": items[4], "time": 104}]}),
        (ev, {"user": users[1], "itm": items[4]}),  # unknown field
        (ev, {"user": True, "item": items[4]}),  # a boolean id
        (ev, {"user": users[1], "item": items[4], "time": "soon"}),  # bad time
        (ev, {"user": "", "item": items[4]}),  # empty id
        (ev, {"user": users[1], "item": 1.5}),
        (ev, [1, 2]),
        (rec, {"user": users[0], "k": 0}),
        (rec, {"user": users[0], "k": 1001}),
        (rec, {"user": users[0], "k": True}),
        (rec, {"user": users[0], "k": 2.0}),
        (rec, {"user": users[0], "exclude_seen": "yes"}),
        (rec, {"user": users[0], "unknown_users": "maybe"}),
        (rec, {"user": users[0], "allow": [items[1], items[5]], "k": 2}),
        (rec, {"user": users[0], "deny": ["never"]}),
        (rec, {"history": [items[1]], "k": 2}),
        (rec, {"user": users[0], "history": [items[1]]}),
        (rec, {"user": None}),
        (rec, {}),
        (rec, "not an object"),
    ]


def _same(a, b):
    assert a.status_code == b.status_code, (a.json(), b.json())
    ja, jb = a.json(), b.json()
    if isinstance(ja, dict) and "scores" in ja:
        np.testing.assert_allclose(ja.pop("scores"), jb.pop("scores"), rtol=1e-6, atol=1e-6)
    assert ja == jb


def test_fast_path_answers_what_the_endpoints_answer(trained, tmp_path):
    artifact, info = trained
    fast_app = create_app(artifact, events=str(tmp_path / "fast.db"))
    slow_app = create_app(artifact, events=str(tmp_path / "slow.db"), fast_path=False)
    assert slow_app.state.fast_path is None
    fast, slow = TestClient(fast_app), TestClient(slow_app)
    n_fast = 0
    for path, body in _requests(info):
        before = fast_app.state.fast_path["answered"]
        _same(fast.post(path, json=body), slow.post(path, json=body))
        n_fast += fast_app.state.fast_path["answered"] - before
    counts = fast_app.state.fast_path
    assert n_fast == 11 and counts["passed"] == len(_requests(info)) - 11
    # the same rules about the body's encoding: curl -d's form type and text are JSON,
    # another type goes to the endpoint
    body = b'{"user": "%s", "k": 2}' % info["users"][0].encode()
    for kind in ("application/x-www-form-urlencoded", "text/plain", "application/xml"):
        headers = {"content-type": kind}
        _same(
            fast.post("/recommend", content=body, headers=headers),
            slow.post("/recommend", content=body, headers=headers),
        )
    # the stored events are the same
    for user in (info["users"][0], "new-1", "12345", info["users"][1]):
        assert [(e.item, e.time, e.id) for e in fast_app.state.live.store.history(user)] == [
            (e.item, e.time, e.id) for e in slow_app.state.live.store.history(user)
        ]


def test_fast_path_keeps_the_api_key_rule(trained, tmp_path):
    artifact, info = trained
    client = TestClient(create_app(artifact, api_key="k3y", events=str(tmp_path / "e.db")))
    event = {"user": "u", "item": info["items"][0], "time": 1}
    assert client.post("/events", json=event).status_code == 401
    assert client.post("/events", json=event, headers={"X-API-Key": "k3y"}).status_code == 200


class _SlowLive:
    """A Live stand-in whose store commit waits for a signal."""

    def __init__(self, fail: bool = False) -> None:
        self.release, self.entered = threading.Event(), threading.Event()
        self.calls: list[int] = []
        self.fail = fail

    def append_many(self, batches):
        self.entered.set()
        self.release.wait(10)
        self.calls.append(sum(len(b) for b in batches))
        if self.fail:
            raise DataError("the disk is full")
        return [{"stored": len(b)} for b in batches]


def test_writer_answers_after_the_commit_and_groups_appends():
    live = _SlowLive()
    writer = Writer(live)

    async def main():
        first = asyncio.ensure_future(writer.append([make_event("u", "i", 1)]))
        await asyncio.sleep(0)
        assert await asyncio.to_thread(live.entered.wait, 10)
        # the first commit is under way: these three wait for the next one, together
        rest = [
            asyncio.ensure_future(writer.append([make_event(f"v{j}", "i", 1)] * (j + 1)))
            for j in range(3)
        ]
        await asyncio.sleep(0.05)
        assert not first.done() and not any(f.done() for f in rest)  # nothing answered early
        live.release.set()
        return await first, await asyncio.gather(*rest)

    one, three = asyncio.run(main())
    writer.close()
    assert one == {"stored": 1} and three == [{"stored": 1}, {"stored": 2}, {"stored": 3}]
    assert live.calls == [1, 6] and writer.commits == 2


def test_writer_passes_the_store_error_to_each_request():
    live = _SlowLive(fail=True)
    live.release.set()
    writer = Writer(live)

    async def main():
        with pytest.raises(DataError, match="disk is full"):
            await writer.append([make_event("u", "i", 1)])

    asyncio.run(main())
    writer.close()


def test_server_start_freezes_the_heap(trained):
    """At start (the app's lifespan), the objects alive are moved out of the cyclic collector's
    reach: a full collection no longer walks the model and the libraries."""
    import gc

    gc.unfreeze()
    app = create_app(trained[0])
    assert gc.get_freeze_count() == 0
    try:
        with TestClient(app) as client:
            assert client.get("/health").status_code == 200
            assert gc.get_freeze_count() > 10_000
    finally:
        gc.unfreeze()
