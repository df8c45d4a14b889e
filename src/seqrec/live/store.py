"""The event store of the live service: every event appended durably, per-user histories, the
whole log for export and replay.

An :class:`EventStore` keeps one log of ``Event(user, item, time, id)`` (raw ids as text, Unix
seconds) and, per user, the user's events in order. ``append`` returns only once the batch is
durable (it survives ``kill -9`` of the process and, for the embedded store, of the machine's
power as far as ``fsync`` goes); an event whose ``id`` is already stored is not stored again, so
a client that re-sends a batch after a lost answer stores each event exactly once.

Backends, chosen by :func:`open_store` from a path or URL:

* :class:`SQLiteStore` (a file path, or ``sqlite:///path``; ``:memory:`` for a throw-away
  replay): the embedded default, SQLite in WAL mode with ``synchronous=FULL``; several
  processes on one machine may share the file;
* ``redis://host:port/db`` (:class:`seqrec.live.redis_store.RedisStore`, the ``live`` extra):
  several service processes or machines share one Redis server, which must run with
  ``appendonly yes`` and ``appendfsync always`` for the same guarantee (checked at open).

Why these two: docs/decisions/live-event-store.md.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from seqrec.errors import ConfigError, DataError
from seqrec.live.events import Event, make_event  # noqa: F401 - make_event re-exported


class EventStore(Protocol):
    """What the live service needs of a store (see the module docstring)."""

    url: str

    def append(self, events: list[Event]) -> list[bool]:
        """Store ``events`` durably, in order; per event, True if stored, False if an event with
        its ``id`` was stored before. Returns only when they are durable."""
        ...

    def count(self, user: str) -> int:
        """How many events ``user`` has."""
        ...

    def history(self, user: str, start: int = 0) -> list[Event]:
        """``user``'s events from the ``start``-th on (0-based), oldest first."""
        ...

    def events(self) -> Iterator[Event]:
        """Every event, in the order they were stored."""
        ...

    def close(self) -> None: ...


def open_store(spec: str | Path) -> EventStore:
    """The store at ``spec``: ``redis://...`` / ``rediss://...`` (Redis), ``sqlite:///path``,
    ``:memory:`` or a file path (SQLite, created if missing)."""
    text = str(spec)
    if text.startswith(("redis://", "rediss://", "unix://")):
        from seqrec.live.redis_store import RedisStore

        return RedisStore(text)
    if "://" in text and not text.startswith("sqlite://"):
        raise ConfigError(
            f"event store {text!r}: expected a file path, sqlite:///path, :memory: or redis://host:port/db"
        )
    return SQLiteStore(text.removeprefix("sqlite://") if text.startswith("sqlite://") else text)


class _Job:
    """One ``append`` call waiting for a group commit."""

    def __init__(self, events: list[Event]) -> None:
        self.events = events
        self.stored: list[bool] = []
        self.error: BaseException | None = None
        self.done = False

    def result(self) -> list[bool]:
        if self.error is not None:
            raise self.error
        return self.stored


_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    user TEXT NOT NULL,
    pos INTEGER NOT NULL,
    item TEXT NOT NULL,
    time INTEGER NOT NULL,
    event_id TEXT UNIQUE
);
CREATE UNIQUE INDEX IF NOT EXISTS events_user_pos ON events (user, pos);
CREATE TABLE IF NOT EXISTS users (user TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
"""


class SQLiteStore:
    """The embedded store: one SQLite file in WAL mode, ``synchronous=FULL`` (each commit is
    fsynced before ``append`` returns). One connection per thread; writes serialised."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self.url = "sqlite:///:memory:" if self.path == ":memory:" else f"sqlite:///{self.path}"
        if self.path != ":memory:":
            parent = Path(self.path).parent
            if not parent.is_dir():
                raise ConfigError(f"event store {self.path}: folder {parent} does not exist")
        self._local = threading.local()
        self._write = threading.Lock()
        self._turn = threading.Condition()
        self._queue: list[_Job] = []
        self._leader = False
        self._shared: sqlite3.Connection | None = None
        if self.path == ":memory:":  # one database: every thread shares its connection
            self._shared = self._connect()
        self._conn().executescript(_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path, timeout=60.0, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
        except sqlite3.DatabaseError as exc:
            raise DataError(f"event store {self.path}: {exc}") from None
        return conn

    def _conn(self) -> sqlite3.Connection:
        if self._shared is not None:
            return self._shared
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._connect()
        return conn

    def append(self, events: list[Event]) -> list[bool]:
        """Group commit: the appends of concurrent threads that arrive while one commit is
        being fsynced go into the next transaction together (one fsync for all of them); each
        call still returns only after its own events are committed."""
        if not events:
            return []
        job = _Job(list(events))
        with self._turn:
            self._queue.append(job)
            while not job.done and self._leader:
                self._turn.wait()
            if job.done:
                return job.result()
            self._leader = True  # this thread commits what is queued now, its own job included
            batch, self._queue = self._queue, []
        try:
            flat = [ev for j in batch for ev in j.events]
            stored = self._commit(flat)
            for j in batch:
                j.stored, stored = stored[: len(j.events)], stored[len(j.events) :]
        except BaseException as exc:
            for j in batch:
                j.error = exc
        finally:
            with self._turn:
                for j in batch:
                    j.done = True
                self._leader = False
                self._turn.notify_all()
        return job.result()

    def _commit(self, events: list[Event]) -> list[bool]:
        conn = self._conn()
        stored = []
        with self._write:
            # BEGIN IMMEDIATE: another process writing the same file waits here, so the
            # per-user positions below are read and written under one write lock
            conn.execute("BEGIN IMMEDIATE")
            try:
                counts: dict[str, int] = {}
                for ev in events:
                    if (
                        ev.id is not None
                        and conn.execute(
                            "SELECT 1 FROM events WHERE event_id = ?", (ev.id,)
                        ).fetchone()
                    ):
                        stored.append(False)
                        continue
                    if ev.user not in counts:
                        row = conn.execute(
                            "SELECT n FROM users WHERE user = ?", (ev.user,)
                        ).fetchone()
                        counts[ev.user] = row[0] if row else 0
                    conn.execute(
                        "INSERT INTO events (user, pos, item, time, event_id) VALUES (?, ?, ?, ?, ?)",
                        (ev.user, counts[ev.user], ev.item, ev.time, ev.id),
                    )
                    counts[ev.user] += 1
                    stored.append(True)
                conn.executemany(
                    "INSERT INTO users (user, n) VALUES (?, ?) "
                    "ON CONFLICT(user) DO UPDATE SET n = excluded.n",
                    list(counts.items()),
                )
                conn.execute("COMMIT")  # synchronous=FULL: durable when this returns
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return stored

    def count(self, user: str) -> int:
        row = self._conn().execute("SELECT n FROM users WHERE user = ?", (user,)).fetchone()
        return int(row[0]) if row else 0

    def history(self, user: str, start: int = 0) -> list[Event]:
        rows = self._conn().execute(
            "SELECT item, time, event_id FROM events WHERE user = ? AND pos >= ? ORDER BY pos",
            (user, int(start)),
        )
        return [Event(user, item, t, eid) for item, t, eid in rows]

    def events(self) -> Iterator[Event]:
        rows = self._conn().execute("SELECT user, item, time, event_id FROM events ORDER BY seq")
        for user, item, t, eid in rows:
            yield Event(user, item, t, eid)

    def n_events(self) -> int:
        return int(self._conn().execute("SELECT COUNT(*) FROM events").fetchone()[0])

    def close(self) -> None:
        conn = self._shared or getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
