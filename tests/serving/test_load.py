"""Quick load test of the real server (uvicorn subprocess on 127.0.0.1, a few hundred requests
from concurrent clients): every request answered, no errors, no memory growth. The full-size
run is benchmarks/bench_serve_load.py (figures in docs/results/serve_load.md)."""

from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow  # a uvicorn subprocess
pytest.importorskip("uvicorn")
pytest.importorskip("httpx")

from seqrec.models.sasrec import SASRec  # noqa: E402
from seqrec.serving import loadtest  # noqa: E402
from seqrec.testing.conformance import fitted  # noqa: E402

# RSS may move by allocator noise; a leak of 64 KiB per request would exceed this over 150.
RSS_TOLERANCE_MB = 8.0


def _listening_addresses(port: int) -> set[str]:
    """Local IPv4/IPv6 addresses (hex, as /proc/net/tcp* writes them) listening on ``port``."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not Path(table).exists():
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found.add(address)
    return found


def test_concurrent_clients_against_the_real_server(tmp_path, monkeypatch):
    model = fitted(SASRec, {"dim": 16, "n_blocks": 1, "n_heads": 1})
    model.save(tmp_path / "art")
    rng = np.random.default_rng(0)
    raw = [str(r) for r in model.vocab.raw]
    payloads = [("/recommend", {"history": list(rng.choice(raw, 8)), "k": 10}) for _ in range(20)]
    payloads.append(
        (
            "/recommend/batch",
            {"requests": [{"history": raw[:3]}, {"history": []}], "k": 5, "deny": raw[:2]},
        )
    )
    payloads.append(("/recommend", {"history": raw[:4], "allow": raw[5:15], "k": 3}))
    listening: list[set[str]] = []
    real_server = loadtest.running_server

    @contextmanager
    def watched_server(*args, **kwargs):  # what the running server really listens on
        with real_server(*args, **kwargs) as (url, proc):
            listening.append(_listening_addresses(int(url.rsplit(":", 1)[1])))
            yield url, proc

    monkeypatch.setattr(loadtest, "running_server", watched_server)
    res = loadtest.load_test(
        tmp_path / "art", payloads, n_requests=300, clients=6, max_seconds=90, warmup=30
    )
    print({k: v for k, v in res.items() if not isinstance(v, list)})
    # loopback only: the load never leaves this machine (0100007F is 127.0.0.1 in /proc's hex)
    if Path("/proc/net/tcp").exists():
        assert listening == [{"0100007F"}]
    assert res["requests"] == 300 and not res["timed_out"]
    assert res["errors"] == 0, res["error_examples"]
    assert 0 < res["p50_ms"] <= res["p99_ms"] < 10_000
    assert res["rss_growth_mb"] < RSS_TOLERANCE_MB


@pytest.mark.parametrize("client", ["raw", "httpx"])
def test_live_mix_against_the_real_server(tmp_path, client):
    """The live mix (append then recommend) with either load-generator client: every pair
    answered, the events stored once each, a refused request counted as an error."""
    from seqrec.live.store import SQLiteStore

    model = fitted(SASRec, {"dim": 16, "n_blocks": 1, "n_heads": 1, "positions": "from_start"})
    model.save(tmp_path / "art")
    raw = [str(r) for r in model.vocab.raw]
    pairs = [
        ({"user": f"u{j % 5}", "item": raw[j % len(raw)], "time": 100 + j}, {"user": f"u{j % 5}"})
        for j in range(40)
    ]
    pairs.append(({"user": "u0", "item": True}, {"user": "u0", "k": 0}))  # two refusals
    store = tmp_path / "e.db"
    res = loadtest.live_load_test(
        tmp_path / "art", str(store), pairs, pairs[:2], clients=4, max_seconds=90, client=client
    )
    assert res["pairs"] == len(pairs) and res["requests"] == 2 * len(pairs)
    assert res["errors"] == 2 and all("HTTP 422" in e for e in res["error_examples"])
    assert res["client"] == client and res["client_cpu_ms_per_request"] > 0
    assert 0 < res["append_then_recommend"]["p50_ms"] <= res["append_then_recommend"]["p99_ms"]
    counts = SQLiteStore(store)
    assert sum(counts.count(f"u{j}") for j in range(5)) == 42  # 40 + the 2 warm-up pairs
