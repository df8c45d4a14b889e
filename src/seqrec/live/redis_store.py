"""The Redis event store: several service processes (or machines) share one log.

``redis://host:port/db`` (``?prefix=NAME`` keeps several logs apart on one server; default
``seqrec``). Keys: ``PREFIX:log`` (every event, a list), ``PREFIX:u:USER`` (the user's events),
``PREFIX:ids`` (the client ids seen, for exactly-once appends). A batch is appended by one Lua
script, so it is atomic and its per-user order is the log's. Redis acknowledges a write after
its append-only file is fsynced only with ``appendonly yes`` and ``appendfsync always``: the store
checks both when it opens and refuses a server without them (``?durable=0`` accepts it, for a
cache you can afford to lose). Needs the ``live`` extra (the ``redis`` client).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from seqrec.errors import ConfigError, DataError
from seqrec.live.events import Event

_APPEND = """
local p = ARGV[1]
local out = {}
for i = 2, #ARGV, 4 do
  local user, item, t, id = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local fresh = 1
  if id ~= '' then fresh = redis.call('SADD', p .. ':ids', id) end
  if fresh == 1 then
    redis.call('RPUSH', p .. ':u:' .. user, cjson.encode({item, t, id}))
    redis.call('RPUSH', p .. ':log', cjson.encode({user, item, t, id}))
  end
  out[#out + 1] = fresh
end
return out
"""

_CHUNK = 10_000


class RedisStore:
    """:class:`seqrec.live.store.EventStore` over a Redis server (see the module docstring)."""

    def __init__(self, url: str) -> None:
        try:
            import redis
        except ImportError:
            raise ConfigError(
                "a redis:// event store needs the redis client: pip install 'seqrec[live]'"
            ) from None
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        self.prefix = query.pop("prefix", "seqrec")
        durable = query.pop("durable", "1") not in ("0", "false", "no")
        plain = urlunsplit(parts._replace(query=urlencode(query)))
        shown = parts._replace(netloc=parts.hostname or "") if parts.password else parts
        self.url = urlunsplit(shown)  # no password in /info
        self._redis = redis.Redis.from_url(plain, socket_timeout=30, socket_connect_timeout=10)
        try:
            config = {
                **self._redis.config_get("appendonly"),
                **self._redis.config_get("appendfsync"),
            }
        except redis.exceptions.ConnectionError as exc:
            raise DataError(f"event store {self.url}: cannot connect: {exc}") from None
        except redis.exceptions.ResponseError:  # CONFIG disabled (a managed server)
            config = None
        if durable and config is not None:
            if config.get("appendonly") != "yes" or config.get("appendfsync") != "always":
                raise ConfigError(
                    f"event store {self.url}: the Redis server runs with appendonly="
                    f"{config.get('appendonly')} appendfsync={config.get('appendfsync')}: an "
                    "acknowledged event could be lost; start it with --appendonly yes "
                    "--appendfsync always (or add ?durable=0 to the URL to accept that)"
                )
        self._script = self._redis.register_script(_APPEND)

    def append(self, events: list[Event]) -> list[bool]:
        if not events:
            return []
        args: list[str] = [self.prefix]
        for ev in events:
            args += [ev.user, ev.item, str(int(ev.time)), "" if ev.id is None else ev.id]
        return [bool(x) for x in self._script(args=args)]

    def count(self, user: str) -> int:
        return int(self._redis.llen(f"{self.prefix}:u:{user}"))

    def history(self, user: str, start: int = 0) -> list[Event]:
        rows = self._redis.lrange(f"{self.prefix}:u:{user}", int(start), -1)
        out = []
        for raw in rows:
            item, t, eid = json.loads(raw)
            out.append(Event(user, item, int(t), eid or None))
        return out

    def events(self) -> Iterator[Event]:
        key, start = f"{self.prefix}:log", 0
        while True:
            rows = self._redis.lrange(key, start, start + _CHUNK - 1)
            for raw in rows:
                user, item, t, eid = json.loads(raw)
                yield Event(user, item, int(t), eid or None)
            if len(rows) < _CHUNK:
                return
            start += _CHUNK

    def n_events(self) -> int:
        return int(self._redis.llen(f"{self.prefix}:log"))

    def close(self) -> None:
        self._redis.close()
