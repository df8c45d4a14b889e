"""Fixtures of the live tests: a small trained SASRec artifact, and a real Redis server.

The Redis tests need ``redis-server`` (Debian: ``apt-get install redis-server``) and the
``redis`` client (the ``live`` extra). Without them they skip locally; in CI (``CI`` set, as
``.ci/run`` sets it, with ``SEQREC_TEST_REDIS`` naming the server it started) a missing server
is a failure, never a skip."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time

import pytest

from seqrec.testing.synthetic import write_log_csv


def _ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


@pytest.fixture(scope="session")
def trained(tmp_path_factory):
    """A SASRec artifact (max_len 5: the live window is exercised) on a synthetic log, and the
    log's info."""
    import seqrec

    tmp = tmp_path_factory.mktemp("live")
    info = write_log_csv(tmp / "log.csv", n_users=30, n_items=20, time_unit="s")
    run = seqrec.train(
        str(tmp / "log.csv"),
        "sasrec",
        data_options={"columns": "user=customer,item=sku,timestamp=event_ms"},
        epochs=1,
        dim=8,
        max_len=5,
        num_threads=1,
        progress=False,
    )
    run.save(tmp / "model")
    return tmp / "model", info


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    """``redis://127.0.0.1:PORT/0`` of a redis-server started for the tests (append-only file,
    fsync on every write), stopped at the end; ``$SEQREC_TEST_REDIS`` names a server already
    running (``.ci/run`` starts one)."""
    given = os.environ.get("SEQREC_TEST_REDIS")
    if given:
        yield given
        return
    binary = shutil.which("redis-server")
    try:
        import redis  # noqa: F401
    except ImportError:
        binary = None
    if binary is None:
        if _ci():
            pytest.fail("CI: redis-server and the redis client must be installed (.ci/run)")
        pytest.skip("no redis-server / redis client (apt-get install redis-server; seqrec[live])")
    folder = tmp_path_factory.mktemp("redis")
    port = _free_port()
    proc = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(folder),
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--save",
            "",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    import redis

    client = redis.Redis(port=port)
    deadline = time.monotonic() + 20
    while True:
        try:
            client.ping()
            break
        except redis.exceptions.ConnectionError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.fail("redis-server did not start")
            time.sleep(0.1)
    client.close()
    yield f"redis://127.0.0.1:{port}/0"
    proc.terminate()
    proc.wait(timeout=20)


_PREFIX = iter(range(1_000_000))


@pytest.fixture()
def redis_url(redis_server):
    """A fresh key prefix on the test server: each test its own log."""
    return f"{redis_server}?prefix=t{next(_PREFIX)}-{os.getpid()}"
