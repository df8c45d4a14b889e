"""Live recommendations: events appended to an :class:`~seqrec.live.store.EventStore`, answers
from each user's stored history plus everything appended since, through the model's incremental
encoder (:func:`seqrec.models.incremental.incremental_encoder`).

:class:`Live` is what the HTTP service, ``seqrec recommend --events`` and ``run.session()`` share:

* ``append(events)`` stores them durably and touches no model state (fast);
* ``recommend(users, k, ...)`` brings each user's encoder state up to date first: a state kept in
  memory absorbs only the user's events it has not seen (the store's per-user count says how
  many), a user without a state in memory gets one built from the artifact's stored history
  (``users.npz``) plus the store's events. States live in an LRU of ``capacity`` users, so memory
  stays bounded however many users write; an evicted state is rebuilt from the store. Several
  processes over one store see each other's events, because the count is read on every answer.

A history is the artifact's stored items followed by the user's events in store order; an event
whose item the model never saw is kept in the store (a retrain learns it) and skipped when
scoring, listed in ``skipped_ids`` like an unknown id of a given history. The seen-item filter
excludes every item of the whole history; the encoder sees the last ``max_len`` (neural models
read no more).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from seqrec.errors import ConfigError, DataError
from seqrec.live.store import Event, EventStore, make_event, open_store
from seqrec.models.incremental import HistoryState, incremental_encoder

UNKNOWN_USERS = ("error", "empty")
_MAX_SKIPPED = 100  # unknown item ids remembered per user (for skipped_ids)


@dataclass
class _Entry:
    state: Any
    absorbed: int  # how many of the user's store events the state holds
    seen: set[int] = field(default_factory=set)
    length: int = 0  # known items in the whole history
    skipped: list[str] = field(default_factory=list)


class Live:
    """A model, an event store and an LRU of per-user encoder states (see the module doc)."""

    def __init__(self, model: Any, store: EventStore | str, capacity: int = 10_000) -> None:
        if capacity < 1:
            raise ConfigError(f"the state cache holds at least 1 user, got {capacity}")
        self.model = model
        self.store = open_store(store) if isinstance(store, str) else store
        self.capacity = int(capacity)
        self.encoder = incremental_encoder(model)
        self.kind = self.encoder.kind
        self.reads_time = bool(getattr(model, "reads_time", False))
        # neural models score the last max_len items only: the state needs no more
        self.window = (
            getattr(getattr(model, "config", None), "max_len", None)
            if hasattr(model, "train_config")
            else None
        )
        self._cache: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    # --- events -------------------------------------------------------------------------
    def append(self, events: Sequence[Event]) -> dict[str, Any]:
        """Store ``events`` durably (returns once they are); what was stored, what was a
        re-sent duplicate, and the item ids the model does not know (stored, not scored)."""
        (out,) = self.append_many([events])
        return out

    def append_many(self, batches: Sequence[Sequence[Event]]) -> list[dict[str, Any]]:
        """:meth:`append` for several requests' events in one durable write (one transaction,
        one ``fsync``; a group commit): one answer per batch, in order."""
        batches = [list(events) for events in batches]
        fresh = self.store.append([ev for events in batches for ev in events])
        out, at = [], 0
        for events in batches:
            mine, at = fresh[at : at + len(events)], at + len(events)
            items = {ev.item for ev in events}
            unknown = sorted(i for i in items if self.model.vocab.encode_known([i])[1])
            out.append(
                {
                    "stored": int(sum(mine)),
                    "duplicates": int(len(mine) - sum(mine)),
                    "unknown_items": unknown,
                }
            )
        return out

    def known(self, user: Any) -> bool:
        """Whether ``user`` has a history: stored in the artifact or created by an event."""
        stored = getattr(self.model, "user_histories", None)
        return (stored is not None and user in stored) or self.store.count(str(user)) > 0

    # --- answers --------------------------------------------------------------------------
    def recommend(
        self,
        users: Sequence[Any],
        k: int = 10,
        exclude_seen: bool = True,
        allow: Sequence[Any] | None = None,
        deny: Sequence[Any] | None = None,
        unknown_users: str = "error",
    ) -> list[Any]:
        """One ``Recommendation`` per user, from their history now (the module doc)."""
        if unknown_users not in UNKNOWN_USERS:
            raise ConfigError(
                f"unknown_users must be one of {', '.join(UNKNOWN_USERS)}, got {unknown_users!r}"
            )
        users = [str(u) for u in users]
        rows, seen, skipped = [], [], []
        stored = getattr(self.model, "user_histories", None)
        with self._lock:
            # one count per user: whether they exist, and how many events their state lacks
            counts = {u: self.store.count(u) for u in users}
            unknown = [
                u for u in users if counts[u] == 0 and not (stored is not None and u in stored)
            ]
            if unknown and unknown_users == "error":
                self._unknown_error(unknown)
            for user in users:
                if user in unknown:
                    scores = np.asarray(self.model.popularity, np.float32).copy()
                    scores[0] = -np.inf
                    rows.append(scores)
                    seen.append(np.zeros(0, np.int64))
                    skipped.append([])
                    continue
                entry = self._entry(user, counts[user])
                rows.append(np.asarray(self.encoder.scores(entry.state), np.float32))
                seen.append(np.fromiter(entry.seen, np.int64, len(entry.seen)))
                skipped.append(list(entry.skipped))
        scores = np.stack(rows) if rows else np.zeros((0, self.model.n_items + 1), np.float32)
        return self.model.rank(scores, seen, k, exclude_seen, allow, deny, skipped)

    def history(self, user: Any) -> list[Any]:
        """The raw item ids of ``user``'s whole history (artifact, then events), oldest first."""
        user = str(user)
        stored = getattr(self.model, "user_histories", None)
        base = (
            list(self.model.vocab.decode(stored.internal([user])[0]))
            if stored is not None and user in stored
            else []
        )
        return base + [ev.item for ev in self.store.history(user)]

    def info(self) -> dict[str, Any]:
        return {
            "store": self.store.url,
            "incremental": self.kind,
            "state_cache": {"capacity": self.capacity, "users": len(self._cache)},
        }

    # --- states ---------------------------------------------------------------------------
    def _entry(self, user: str, count: int) -> _Entry:
        """The user's state, up to date with the store's ``count`` events of the user (call
        under the lock)."""
        entry = self._cache.get(user)
        if entry is None:
            self.misses += 1
            entry = self._build(user)
            self._cache[user] = entry
            if len(self._cache) > self.capacity:
                self._cache.popitem(last=False)
        else:
            self.hits += 1
            self._cache.move_to_end(user)
            if count > entry.absorbed:
                for ev in self.store.history(user, entry.absorbed):
                    self._absorb(entry, ev)
        return entry

    def _build(self, user: str) -> _Entry:
        stored = getattr(self.model, "user_histories", None)
        items = np.zeros(0, np.int64)
        times = np.zeros(0, np.int64) if self.reads_time else None
        if stored is not None and user in stored:
            items = stored.internal([user])[0]
            if self.reads_time:
                stored_times = stored.times_of([user])
                if stored_times is None and len(items):
                    raise DataError(
                        f"{self.model.name} reads time and the artifact stores no times for "
                        f"user {user!r}"
                    )
                times = np.asarray(stored_times[0] if stored_times else [], np.int64)
        events = self.store.history(user)
        ev_items, ev_times, skipped = [], [], []
        for ev in events:
            ids, unknown = self.model.vocab.encode_known([ev.item])
            if unknown:
                if ev.item not in skipped and len(skipped) < _MAX_SKIPPED:
                    skipped.append(ev.item)
                continue
            ev_items.append(int(ids[0]))
            ev_times.append(int(ev.time))
        all_items = np.concatenate([items, np.asarray(ev_items, np.int64)])
        start_items = all_items if self.window is None else all_items[-self.window :]
        start_times = None
        if times is not None:
            all_times = np.concatenate([times, np.asarray(ev_times, np.int64)])
            start_times = all_times if self.window is None else all_times[-self.window :]
        state = self.encoder.start(start_items, start_times)
        return _Entry(state, len(events), set(all_items.tolist()), len(all_items), skipped)

    def _absorb(self, entry: _Entry, ev: Event) -> None:
        entry.absorbed += 1
        ids, unknown = self.model.vocab.encode_known([ev.item])
        if unknown:
            if ev.item not in entry.skipped and len(entry.skipped) < _MAX_SKIPPED:
                entry.skipped.append(ev.item)
            return
        item = int(ids[0])
        entry.state = self.encoder.append(
            entry.state, item, int(ev.time) if self.reads_time else None
        )
        entry.seen.add(item)
        entry.length += 1
        state = entry.state
        # the re-encode fallback keeps the history itself: keep the window the model reads
        if self.window is not None and isinstance(state, HistoryState):
            if len(state.items) > 2 * self.window:
                del state.items[: -self.window]
                if state.times is not None:
                    del state.times[: -self.window]

    def _unknown_error(self, unknown: list[str]) -> None:
        stored = getattr(self.model, "user_histories", None)
        removed = set(stored.removed.tolist()) if stored is not None else set()
        shown = ", ".join(
            f"{u!r} ({'removed by preprocessing' if u in removed else 'never seen'})"
            for u in unknown[:10]
        )
        raise DataError(
            f"unknown user id(s), with no stored history and no events: {shown} (a user's first "
            'event creates them; "unknown_users": "empty" / --unknown-users empty answers them '
            "with the popularity ranking instead)"
        )


class Session:
    """One user's live stream in Python (``run.session(...)``): ``append`` events, then
    ``recommend`` from the history so far (raw ids in and out)."""

    def __init__(self, live: Live, user: str) -> None:
        self.live, self.user = live, str(user)

    def append(self, item: Any, time: Any = None, id: Any = None) -> Session:
        """Absorb one event (``time``: Unix seconds or an ISO date; required by a model that
        reads time, else the current time is recorded); returns the session."""
        if time is None and self.live.reads_time:
            raise DataError(f"{self.live.model.name} reads time: append(item, time=...)")
        self.live.append([make_event(self.user, item, time, id)])
        return self

    def extend(self, items: Sequence[Any], times: Sequence[Any] | None = None) -> Session:
        """Append several events at once (one durable write)."""
        if times is not None and len(times) != len(items):
            raise DataError(f"{len(times)} times for {len(items)} items")
        if times is None and self.live.reads_time and len(items):
            raise DataError(f"{self.live.model.name} reads time: extend(items, times=...)")
        ts = list(times) if times is not None else [None] * len(items)
        self.live.append([make_event(self.user, i, t) for i, t in zip(items, ts, strict=True)])
        return self

    def recommend(
        self,
        k: int = 10,
        exclude_seen: bool = True,
        allow: Sequence[Any] | None = None,
        deny: Sequence[Any] | None = None,
    ) -> Any:
        """Top-``k`` raw item ids from the history so far (a ``Recommendation``); a session
        without any event yet gets the popularity ranking (``fallback``)."""
        (rec,) = self.live.recommend([self.user], k, exclude_seen, allow, deny, "empty")
        return rec

    @property
    def history(self) -> list[Any]:
        """Raw item ids of the whole history so far, oldest first."""
        return self.live.history(self.user)

    def __repr__(self) -> str:
        return f"Session(user={self.user!r}, model={self.live.model.name}, store={self.live.store.url})"


def session(
    model: Any,
    user: Any = None,
    history: Sequence[Any] | None = None,
    times: Sequence[Any] | None = None,
    store: EventStore | str | None = None,
    unknown_users: str = "error",
) -> Session:
    """A :class:`Session` for ``user`` (their stored history and their events in ``store``) or
    for a new anonymous stream (``user=None``); ``history`` (raw ids, with ``times`` for a
    model that reads time) is appended first. ``store``: a path / URL / store to keep the
    events in (default: in memory, gone with the session). A ``user`` with neither a stored
    history nor events is refused unless ``unknown_users="empty"`` (then it starts empty)."""
    if unknown_users not in UNKNOWN_USERS:
        raise ConfigError(
            f"unknown_users must be one of {', '.join(UNKNOWN_USERS)}, got {unknown_users!r}"
        )
    live = Live(model, ":memory:" if store is None else store, capacity=16)
    if user is None:
        user = "anonymous"
    elif unknown_users == "error" and not history and not live.known(user):
        live._unknown_error([str(user)])
    out = Session(live, user)
    if history:
        out.extend(list(history), None if times is None else list(times))
    return out
