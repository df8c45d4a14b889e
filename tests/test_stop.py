"""SIGINT / SIGTERM become a stop request inside ``stop.on_signals()``; a second one raises."""

import os
import signal
import threading

import pytest

from seqrec import stop


def _signal_self(signum: int) -> None:
    os.kill(os.getpid(), signum)
    # the handler runs at the next bytecode boundary of the main thread; give it one
    for _ in range(1000):
        if stop.requested():
            break


def test_a_signal_requests_a_stop_and_a_second_one_raises():
    before = signal.getsignal(signal.SIGTERM)
    with stop.on_signals():
        assert not stop.requested()
        _signal_self(signal.SIGTERM)
        assert stop.requested() and stop.signal_number() == signal.SIGTERM
        _signal_self(signal.SIGINT)  # another signal: still the same clean stop
        assert stop.signal_number() == signal.SIGTERM
        with pytest.raises(KeyboardInterrupt):
            _signal_self(signal.SIGTERM)
    assert not stop.requested()  # cleared for the next table
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_shared_event_carries_the_request_both_ways():
    event = threading.Event()  # the same interface as multiprocessing's
    with stop.on_signals():
        stop.watch(event)
        event.set()  # another process asked
        assert stop.requested() and stop.signal_number() is None
    assert not stop.requested()
    event = threading.Event()
    with stop.on_signals():
        stop.watch(event)
        stop.request()
        assert event.is_set()  # this process asked: the others see it
