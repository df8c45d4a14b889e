"""A bounded load test of the real HTTP service: ``uvicorn`` in a subprocess on 127.0.0.1 (a
free port, never another address), concurrent clients, a fixed request count and a time
limit, then throughput, latency percentiles, errors and the server's memory.

Memory: the server's RSS (``/proc/PID/status`` ``VmRSS``) is sampled after a warm-up (the
first requests allocate scoring buffers and import lazily), half-way through the measured
requests and at the end. ``rss_growth_mb`` is end minus half-way, so one-off allocations of
the first measured requests do not count; a leak of ``b`` bytes per request shows as
``b * requests / 2``. Used by ``benchmarks/bench_serve_load.py`` and a quick test.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from seqrec.errors import SeqRecError

HOST = "127.0.0.1"  # loopback only: the load never leaves this machine


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def rss_mb(pid: int) -> float:
    """Resident memory of process ``pid`` in MiB (Linux ``/proc``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    raise SeqRecError(f"no VmRSS for process {pid}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far, all its threads (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def running_server(
    artifact: str | Path,
    port: int | None = None,
    start_timeout: float = 120.0,
    events: str | None = None,
    state_cache: int | None = None,
    cpus: list[int] | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[tuple[str, subprocess.Popen]]:
    """``uvicorn seqrec.serving.service:app_from_env`` on 127.0.0.1 in a subprocess; yields
    ``(base_url, process)`` once ``/health`` answers, and stops the process on exit.
    ``events`` / ``state_cache``: the live event store and its state cache (``seqrec serve
    --events``); ``cpus``: the cores the server may run on (``taskset``); ``env``: more
    environment for the server (e.g. ``SEQREC_EXACT``)."""
    import httpx

    port = port or free_port()
    env = dict(os.environ, **(env or {}), SEQREC_ARTIFACT=str(artifact), OMP_NUM_THREADS="1")
    if events is not None:
        env["SEQREC_EVENTS"] = str(events)
    if state_cache is not None:
        env["SEQREC_STATE_CACHE"] = str(state_cache)
    src = str(Path(__file__).resolve().parents[2])  # this checkout's src/, first on the path
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [
        sys.executable,
        "-m",
        "uvicorn",
        "seqrec.serving.service:app_from_env",
        "--factory",
        "--host",
        HOST,
        "--port",
        str(port),
        "--log-level",
        "warning",
        "--no-access-log",
    ]
    if cpus:
        cmd = ["taskset", "-c", ",".join(map(str, cpus)), *cmd]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://{HOST}:{port}"
    try:
        deadline = time.monotonic() + start_timeout
        while True:
            if proc.poll() is not None:
                err = proc.stderr.read().decode(errors="replace")[-2000:] if proc.stderr else ""
                raise SeqRecError(f"the server exited with code {proc.returncode}: {err}")
            try:
                if httpx.get(url + "/health", timeout=2.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise SeqRecError(f"the server did not answer /health within {start_timeout:.0f}s")
            time.sleep(0.2)
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


def drive(
    url: str,
    payloads: list[tuple[str, dict[str, Any]]],
    n_requests: int,
    clients: int,
    max_seconds: float,
) -> dict[str, Any]:
    """Send ``n_requests`` POSTs (cycling over ``payloads``) from ``clients`` threads, each with
    its own keep-alive connection; stops early at ``max_seconds``. Returns counts, latencies
    (ms) and the first few error messages."""
    import httpx

    lock = threading.Lock()
    state = {"next": 0}
    latencies: list[float] = []
    errors: list[str] = []
    deadline = time.monotonic() + max_seconds

    def worker() -> None:
        with httpx.Client(base_url=url, timeout=30.0) as client:
            while time.monotonic() < deadline:
                with lock:
                    i = state["next"]
                    if i >= n_requests:
                        return
                    state["next"] = i + 1
                path, body = payloads[i % len(payloads)]
                t0 = time.perf_counter()
                try:
                    resp = client.post(path, json=body)
                    ok, why = resp.status_code == 200, f"HTTP {resp.status_code}: {resp.text[:200]}"
                except httpx.HTTPError as exc:
                    ok, why = False, f"{type(exc).__name__}: {exc}"
                dt = (time.perf_counter() - t0) * 1000.0
                with lock:
                    latencies.append(dt)
                    if not ok:
                        errors.append(why)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=max_seconds + 60)
    seconds = time.perf_counter() - t0
    return {
        "requests": len(latencies),
        "errors": len(errors),
        "error_examples": errors[:3],
        "seconds": seconds,
        "latencies_ms": latencies,
        "timed_out": len(latencies) < n_requests,
    }


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals, throughput and latency percentiles over several ``drive`` results."""
    lat = np.concatenate([np.asarray(r["latencies_ms"], dtype=float) for r in runs] + [np.zeros(0)])
    total = int(sum(r["requests"] for r in runs))
    seconds = float(sum(r["seconds"] for r in runs))
    pct = (lambda q: float(np.percentile(lat, q))) if len(lat) else (lambda q: float("nan"))
    return {
        "requests": total,
        "errors": int(sum(r["errors"] for r in runs)),
        "error_examples": [e for r in runs for e in r["error_examples"]][:3],
        "seconds": seconds,
        "throughput_rps": total / seconds if seconds else 0.0,
        "p50_ms": pct(50),
        "p90_ms": pct(90),
        "p99_ms": pct(99),
        "max_ms": float(lat.max()) if len(lat) else float("nan"),
        "timed_out": any(r["timed_out"] for r in runs),
    }


def _halves(first: dict, second: dict, rss_warm: float, rss_half: float, rss_end: float) -> dict:
    """Throughput of each measured half and the server's RSS after warm-up, half-way and at
    the end (its growth over the second half is what must stay flat)."""
    return {
        "throughput_rps_halves": [
            summary([first])["throughput_rps"],
            summary([second])["throughput_rps"],
        ],
        "rss_warm_mb": rss_warm,
        "rss_half_mb": rss_half,
        "rss_end_mb": rss_end,
        "rss_growth_mb": rss_end - rss_half,
    }


def load_test(
    artifact: str | Path,
    payloads: list[tuple[str, dict[str, Any]]],
    n_requests: int,
    clients: int = 8,
    max_seconds: float = 120.0,
    warmup: int = 50,
    env: dict[str, str] | None = None,
    start_timeout: float = 120.0,
) -> dict[str, Any]:
    """Start the server, warm it up, run two halves of ``n_requests`` and sample its RSS
    after the warm-up, after the first half and at the end (see the module docstring);
    ``env``: extra environment of the server (``SEQREC_EXACT=1``: no item index)."""
    with running_server(artifact, start_timeout=start_timeout, env=env) as (url, proc):
        drive(url, payloads, warmup, clients, max_seconds)
        rss_warm = rss_mb(proc.pid)
        half = n_requests // 2
        first = drive(url, payloads, half, clients, max_seconds / 2)
        rss_half = rss_mb(proc.pid)
        second = drive(url, payloads, n_requests - half, clients, max_seconds / 2)
        rss_end = rss_mb(proc.pid)
    out = summary([first, second])
    out.update(
        {
            "clients": clients,
            "warmup_requests": warmup,
            **_halves(first, second, rss_warm, rss_half, rss_end),
        }
    )
    return out


class RawClient:
    """A minimal HTTP/1.1 keep-alive client for the load generator: one socket, the request
    bytes written at once, the answer read by its ``Content-Length`` (what the service always
    sends). A load generator's own CPU is not the server's latency; on a machine with few
    cores, a full client library (httpx) in eight Python threads costs about as much CPU per
    request as the server and its queueing ends up in the measured latency."""

    def __init__(self, url: str, timeout: float = 30.0) -> None:
        host, _, port = url.removeprefix("http://").rstrip("/").partition(":")
        self.host = host.encode()
        self.sock = socket.create_connection((host, int(port or 80)), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        """``(status, body)`` of a POST of the JSON ``body``."""
        head = (
            b"POST %s HTTP/1.1\r\nhost: %s\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\n\r\n" % (path.encode(), self.host, len(body))
        )
        self.sock.sendall(head + body)
        while b"\r\n\r\n" not in self.buf:
            self._read()
        head, _, rest = self.buf.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        length = None
        for line in lines[1:]:
            key, _, value = line.partition(b":")
            if key.strip().lower() == b"content-length":
                length = int(value)
        if length is None:
            raise SeqRecError(f"an answer without Content-Length: {head[:200]!r}")
        self.buf = rest
        while len(self.buf) < length:
            self._read()
        out, self.buf = self.buf[:length], self.buf[length:]
        return status, out

    def _read(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self.buf += chunk

    def close(self) -> None:
        self.sock.close()


def drive_pairs(
    url: str,
    pairs: list[tuple[dict[str, Any], dict[str, Any]]],
    clients: int,
    max_seconds: float,
    client: str = "raw",
) -> dict[str, Any]:
    """The live mix: each of ``clients`` threads takes the next ``(event, query)`` of ``pairs``
    and sends ``POST /events`` with the event, then ``POST /recommend`` with the query (the same
    user), on its keep-alive connection (``client``: ``"raw"``, :class:`RawClient`, or
    ``"httpx"``). Returns what :func:`drive` does, over both requests (``latencies_ms``), plus
    ``pair_latencies_ms`` (append sent to recommendation received), the latencies of each kind
    and ``client_cpu_seconds`` (this process's CPU time while it ran: the load generator's)."""
    import json

    import httpx

    if client not in ("raw", "httpx"):
        raise SeqRecError(f"client must be 'raw' or 'httpx', got {client!r}")
    lock = threading.Lock()
    state = {"next": 0}
    out: dict[str, list] = {"all": [], "pair": [], "append": [], "recommend": [], "errors": []}
    deadline = time.monotonic() + max_seconds

    def send(conn: Any, path: str, body: dict[str, Any]) -> tuple[float, str | None]:
        data = json.dumps(body).encode() if client == "raw" else None
        t0 = time.perf_counter()
        try:
            if client == "raw":
                status, text = conn.post(path, data)
            else:
                resp = conn.post(path, json=body)
                status, text = resp.status_code, resp.content
            why = None if status == 200 else f"HTTP {status}: {text[:200]!r}"
        except (httpx.HTTPError, OSError, SeqRecError, ValueError) as exc:
            why = f"{type(exc).__name__}: {exc}"
        return (time.perf_counter() - t0) * 1000.0, why

    def connect() -> Any:
        if client == "raw":
            return contextlib.closing(RawClient(url))
        return httpx.Client(base_url=url, timeout=30.0)

    def worker() -> None:
        with connect() as conn:
            while time.monotonic() < deadline:
                with lock:
                    i = state["next"]
                    if i >= len(pairs):
                        return
                    state["next"] = i + 1
                event, query = pairs[i]
                a, err_a = send(conn, "/events", event)
                r, err_r = send(conn, "/recommend", query)
                with lock:
                    out["all"] += [a, r]
                    out["append"].append(a)
                    out["recommend"].append(r)
                    out["pair"].append(a + r)
                    out["errors"] += [e for e in (err_a, err_r) if e]

    t0, cpu0 = time.perf_counter(), time.process_time()
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=max_seconds + 60)
    seconds = time.perf_counter() - t0
    return {
        "client_cpu_seconds": time.process_time() - cpu0,
        "requests": len(out["all"]),
        "errors": len(out["errors"]),
        "error_examples": out["errors"][:3],
        "seconds": seconds,
        "latencies_ms": out["all"],
        "pair_latencies_ms": out["pair"],
        "append_latencies_ms": out["append"],
        "recommend_latencies_ms": out["recommend"],
        "timed_out": len(out["pair"]) < len(pairs),
    }


def live_load_test(
    artifact: str | Path,
    events: str,
    pairs: list[tuple[dict[str, Any], dict[str, Any]]],
    warmup: list[tuple[dict[str, Any], dict[str, Any]]],
    clients: int = 8,
    max_seconds: float = 600.0,
    state_cache: int | None = None,
    cpus: list[int] | None = None,
    client: str = "raw",
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The live service under :func:`drive_pairs`: warm-up pairs, then two halves of ``pairs``,
    the server's RSS sampled after the warm-up, half-way and at the end (module docstring);
    ``client``: the load generator's HTTP client; ``env``: more environment for the server."""
    with running_server(artifact, events=events, state_cache=state_cache, cpus=cpus, env=env) as (
        url,
        proc,
    ):
        drive_pairs(url, warmup, clients, max_seconds, client)
        rss_warm = rss_mb(proc.pid)
        cpu_start = cpu_seconds(proc.pid)
        half = len(pairs) // 2
        first = drive_pairs(url, pairs[:half], clients, max_seconds / 2, client)
        rss_half = rss_mb(proc.pid)
        second = drive_pairs(url, pairs[half:], clients, max_seconds / 2, client)
        rss_end = rss_mb(proc.pid)
        cpu = cpu_seconds(proc.pid) - cpu_start
    out = summary([first, second])

    def pct(key: str) -> dict[str, float]:
        lat = np.asarray(first[key] + second[key], dtype=float)
        if not len(lat):
            return {"p50_ms": float("nan"), "p99_ms": float("nan"), "max_ms": float("nan")}
        return {
            "p50_ms": float(np.percentile(lat, 50)),
            "p99_ms": float(np.percentile(lat, 99)),
            "max_ms": float(lat.max()),
        }

    out.update(
        {
            "clients": clients,
            "pairs": len(first["pair_latencies_ms"]) + len(second["pair_latencies_ms"]),
            "warmup_pairs": len(warmup),
            "append_then_recommend": pct("pair_latencies_ms"),
            "append": pct("append_latencies_ms"),
            "recommend": pct("recommend_latencies_ms"),
            **_halves(first, second, rss_warm, rss_half, rss_end),
            # the server's own CPU per measured request: what the load costs it, whatever else
            # runs on the machine (latencies include waiting for a shared core)
            "server_cpu_ms_per_request": 1000.0 * cpu / max(1, out["requests"]),
            # the load generator's CPU per request (its threads share the other cores)
            "client": client,
            "client_cpu_ms_per_request": 1000.0
            * (first["client_cpu_seconds"] + second["client_cpu_seconds"])
            / max(1, out["requests"]),
        }
    )
    return out
