"""The real server process: SIGKILLed in the middle of a stream of appends loses no
acknowledged event and stores none twice (must-show 4), and two service processes over the
Redis store see each other's events (must-show 6, run in CI against a real Redis server)."""

import collections
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")
from fastapi.testclient import TestClient  # noqa: E402

from seqrec.live.store import open_store  # noqa: E402
from seqrec.serving.loadtest import free_port  # noqa: E402
from seqrec.serving.service import create_app  # noqa: E402

pytestmark = pytest.mark.slow


def _serve(artifact, events, timeout=120.0):
    """``seqrec serve ARTIFACT --events EVENTS`` on a free port; (url, process) once it answers."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "seqrec", "serve", str(artifact), "--port", str(port)]
        + ["--events", str(events)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=dict(os.environ, OMP_NUM_THREADS="1"),
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise AssertionError(f"the server exited: {proc.stderr.read().decode()[-2000:]}")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return url, proc
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.2)


def _stop(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _stream(info, n=400, n_users=12, seed=0):
    rng = np.random.default_rng(seed)
    users = info["users"][: n_users // 2] + [f"new{u}" for u in range(n_users // 2)]
    return [
        {
            "user": users[int(rng.integers(0, n_users))],
            "item": info["items"][int(rng.integers(0, len(info["items"])))],
            "time": 1_700_000_000 + i,
            "id": f"e{i}",
        }
        for i in range(n)
    ]


@pytest.fixture(params=["sqlite", "redis"])
def store_spec(request, tmp_path):
    if request.param == "sqlite":
        return str(tmp_path / "events.db")
    return request.getfixturevalue("redis_url")


def test_sigkill_mid_stream_loses_no_acknowledged_event(trained, store_spec, tmp_path):
    artifact, info = trained
    stream = _stream(info)
    acked: list[str] = []
    stop_at: dict[str, int] = {}
    url, proc = _serve(artifact, store_spec)

    def sender() -> None:
        with httpx.Client(base_url=url, timeout=10) as client:
            for i, ev in enumerate(stream):
                try:
                    resp = client.post("/events", json=ev)
                    assert resp.status_code == 200, resp.text
                    acked.append(ev["id"])
                except httpx.HTTPError:
                    stop_at["i"] = i  # this one was in flight: acknowledged or not, unknown
                    return

    thread = threading.Thread(target=sender)
    try:
        thread.start()
        while len(acked) < 150 and thread.is_alive():
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGKILL)  # in the middle of the stream
        thread.join(timeout=60)
        proc.wait(timeout=20)
    finally:
        _stop(proc)
    assert "i" in stop_at and 150 <= len(acked) < len(stream), (len(acked), stop_at)
    url, proc = _serve(artifact, store_spec)  # restart on the same store
    try:
        store = open_store(store_spec)
        ids = collections.Counter(e.id for e in store.events())
        assert all(ids[i] == 1 for i in acked), "an acknowledged event is missing or doubled"
        assert max(ids.values()) == 1 and len(ids) <= len(acked) + 1  # + the one in flight
        # the client re-sends from the first unacknowledged event: the ids keep it exactly-once
        with httpx.Client(base_url=url, timeout=30) as client:
            for start in range(stop_at["i"], len(stream), 50):
                resp = client.post("/events", json={"events": stream[start : start + 50]})
                assert resp.status_code == 200, resp.text
            users = sorted({ev["user"] for ev in stream})
            answers = [
                client.post("/recommend", json={"user": u, "k": 5}).json()["items"] for u in users
            ]
        assert [e.id for e in store.events()] == [ev["id"] for ev in stream]  # once, in order
        store.close()
    finally:
        _stop(proc)
    # an uninterrupted run over the same stream answers the same
    plain = TestClient(create_app(artifact, events=str(tmp_path / "uninterrupted.db")))
    assert plain.post("/events", json={"events": stream}).status_code == 200
    want = [plain.post("/recommend", json={"user": u, "k": 5}).json()["items"] for u in users]
    assert answers == want


def test_two_service_processes_over_redis_see_each_other(trained, redis_url):
    artifact, info = trained
    (url_a, a), (url_b, b) = _serve(artifact, redis_url), _serve(artifact, redis_url)
    try:
        with (
            httpx.Client(base_url=url_a, timeout=30) as ca,
            httpx.Client(base_url=url_b, timeout=30) as cb,
        ):
            user, items = info["users"][4], info["items"]
            before = cb.post("/recommend", json={"user": user, "k": 5}).json()  # b keeps a state
            assert ca.post("/events", json={"user": user, "item": items[9]}).status_code == 200
            after = cb.post("/recommend", json={"user": user, "k": 5}).json()
            assert items[9] not in after["items"]  # seen now, through b
            assert (
                after["items"] == ca.post("/recommend", json={"user": user, "k": 5}).json()["items"]
            )
            assert after["items"] != before["items"] or after["scores"] != before["scores"]
            # a new user created through b is known to a
            assert cb.post("/events", json={"user": "fresh", "item": items[2]}).status_code == 200
            got = ca.post("/recommend", json={"user": "fresh", "k": 5}).json()
            assert got["fallback"] is None and items[2] not in got["items"]
            assert ca.get("/info").json()["events"]["store"].startswith("redis://")
    finally:
        _stop(a)
        _stop(b)
