"""Durable appends for an asyncio service: one writer thread group-commits, the event loop awaits.

An ``async`` handler must not wait on a commit itself: the commit's ``fsync`` would stop the
event loop, and every other request with it. :class:`Writer` owns one thread. A handler
``await writer.append(events)``: the events join a queue and the handler's coroutine is
suspended. The thread takes everything queued (the appends of every request that arrived while
the previous commit was being made), stores it in one :meth:`Live.append_many` call (one
transaction, one ``fsync``) and resolves each request's future on its own loop. So an answer is
sent only after its events are durable, the loop keeps serving while the disk works, and
concurrent appends share a commit.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from typing import Any, Sequence

from seqrec.live.events import Event

_STOP = object()


class Writer:
    """One thread that stores the appends of ``live`` (a :class:`seqrec.live.session.Live`)
    in group commits; :meth:`append` is awaited on any event loop."""

    def __init__(self, live: Any) -> None:
        self.live = live
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="seqrec-event-writer", daemon=True)
        self._thread.start()
        self.commits = 0  # group commits made (each: one store append, one fsync)

    async def append(self, events: Sequence[Event]) -> dict[str, Any]:
        """What :meth:`Live.append` returns, once ``events`` are durable (its errors raised)."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._queue.put((list(events), future, loop))
        return await future

    def close(self) -> None:
        """Stop the thread after the appends queued so far."""
        self._queue.put(_STOP)
        self._thread.join(timeout=60)

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            if job is _STOP:
                return
            jobs = [job]
            stop = False
            while True:  # everything queued meanwhile joins this commit
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is _STOP:
                    stop = True
                    break
                jobs.append(more)
            try:
                outcomes: list[Any] = self.live.append_many([events for events, _, _ in jobs])
            except BaseException as exc:  # nothing of this group was stored: each request says so
                outcomes = [exc] * len(jobs)
            self.commits += 1
            for (_, future, loop), outcome in zip(jobs, outcomes, strict=True):
                try:
                    loop.call_soon_threadsafe(_settle, future, outcome)
                except RuntimeError:  # that loop is closed: nobody waits for the answer
                    pass
            if stop:
                return


def _settle(future: asyncio.Future, outcome: Any) -> None:
    if future.done():  # the request was cancelled (client gone): the events are stored anyway
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)
