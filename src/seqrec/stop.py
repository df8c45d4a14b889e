"""A process-wide request to stop training cleanly, set by SIGINT / SIGTERM.

The trainer checks :func:`requested` between steps, exactly where it checks its ``deadline``:
once set, the run checkpoints, stops with ``stopped = "interrupted"`` and returns, so its
caller can still write a partial record; the next ``fit`` resumes it. A signal only sets a
flag (a handler that raised would abort the step, or a record half-way). A second signal of
the same kind raises ``KeyboardInterrupt``, the usual escape when a clean stop takes too long
(a factorization fit cannot stop half-way).

Processes that train for a coordinator (the reproduction harness's workers) also share an
event: :func:`watch` makes :func:`requested` true once it is set, and a signal received by
any of them sets it, so stopping one process stops them all.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Iterator
from typing import Any

from seqrec.errors import SeqRecError

log = logging.getLogger(__name__)

SIGNALS = (signal.SIGINT, signal.SIGTERM)

_received: int | None = None  # the first signal number received, or 0 for request()
_shared: Any = None  # a multiprocessing Event shared with the coordinator, if any


class Interrupted(SeqRecError):
    """Training was asked to stop (a signal); unfinished runs were checkpointed."""

    def __init__(self, message: str, signum: int | None = None) -> None:
        super().__init__(message)
        self.signum = signum


def requested() -> bool:
    """True once this process, or any process sharing the watched event, was asked to stop."""
    return _received is not None or (_shared is not None and _shared.is_set())


def signal_number() -> int | None:
    """The signal that asked for the stop (None: none, or asked without a signal)."""
    return _received or None


def request(signum: int = 0) -> None:
    """Ask training in this process (and in the processes sharing the event) to stop."""
    global _received
    if _received is None:
        _received = signum
    if _shared is not None:
        _shared.set()


def clear() -> None:
    """Forget a request (the next table or test starts clean)."""
    global _received, _shared
    _received = None
    _shared = None


def watch(event: Any) -> None:
    """Share stop requests with other processes through ``event`` (``multiprocessing.Event``)."""
    global _shared
    _shared = event


def _handle(signum: int, frame: Any) -> None:  # noqa: ARG001 - the signal handler signature
    if _received == signum:
        raise KeyboardInterrupt  # asked twice: stop now
    log.warning(
        "%s received: stopping after the current step (checkpoint + partial record)",
        signal.Signals(signum).name,
    )
    request(signum)


def install() -> dict[int, Any]:
    """Route SIGINT and SIGTERM to a stop request; returns the previous handlers."""
    return {s: signal.signal(s, _handle) for s in SIGNALS}


@contextlib.contextmanager
def on_signals() -> Iterator[None]:
    """Within the block, SIGINT / SIGTERM ask for a clean stop; afterwards the previous handlers
    and a clean flag are back. Outside the main thread (where handlers cannot be set) the
    block only clears the flag afterwards."""
    previous = install() if threading.current_thread() is threading.main_thread() else {}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        clear()
