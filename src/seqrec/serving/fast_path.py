"""The live service's two hot requests without the framework: ``POST /events`` with one event
and ``POST /recommend`` for a user.

:class:`FastPath` is ASGI middleware inside the app's own (API key, CORS and the JSON body rule
still apply before it). For those two paths it reads the body and answers itself when the body
is one of the plain shapes below, every value of the type the endpoint's model would accept:

* ``/events``: ``{"user", "item"[, "time"][, "id"]}``, ids and time text or integers, time and id
  possibly null;
* ``/recommend``: ``{"user"[, "k"][, "exclude_seen"][, "unknown_users"]}``, ``k`` an integer in
  1..1000, ``exclude_seen`` a boolean, ``unknown_users`` ``"error"`` or ``"empty"``.

Anything else (a batch of events, a history, allow / deny lists, an unknown field, a wrong
type, a body that is not a JSON object, another content type, an event the store refuses
before writing) goes to the FastAPI endpoint with the same body, which validates it and
answers, or refuses it with its usual 422. So the fast path changes how fast an answer comes,
never which answer: the endpoint and the fast path call the same ``Live`` methods and the same
answer builder, and a test compares the two on the same requests.

Why: on one core, the framework's per-request work (request and response models, dependency
resolution, the thread-pool hop of a sync endpoint) cost about as much as absorbing the event
and ranking the catalogue (docs/decisions/live-request-path.md). An event is stored through the
:class:`seqrec.live.writer.Writer` thread (the loop never waits on ``fsync``; a 2xx only after
the commit); a recommendation runs on the event loop's thread (one core and the GIL: a
thread-pool hop buys nothing), except over a network store (Redis), whose round trips would
hold up the loop: there it runs in the loop's default thread pool.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Callable

from seqrec.errors import SeqRecError

EVENT_FIELDS = frozenset(("user", "item", "time", "id"))
RECOMMEND_FIELDS = frozenset(("user", "k", "exclude_seen", "unknown_users"))
MAX_K = 1000  # the endpoint's bound on k
_ID = (str, int)  # exact types: a JSON boolean is a bool, which the endpoint refuses
_JSON = (b"content-type", b"application/json")


class FastPath:
    """ASGI middleware answering the plain ``/events`` and ``/recommend`` bodies directly (the
    module doc); ``live``: the app's :class:`~seqrec.live.session.Live`; ``writer``: its
    :class:`~seqrec.live.writer.Writer`; ``body``: the endpoint's answer builder
    (``Recommendation`` -> JSON object); ``counts``: how many requests were answered here and
    how many passed to the endpoint."""

    def __init__(
        self,
        app: Any,
        live: Any,
        writer: Any,
        body: Callable[[Any], dict[str, Any]],
        counts: dict[str, int] | None = None,
    ) -> None:
        from seqrec.live.store import SQLiteStore

        self.app, self.live, self.writer, self.body = app, live, writer, body
        # the embedded store answers a user's count in microseconds: the model work runs on the
        # loop's thread; a store over the network (Redis) is read from a worker thread
        self.inline = isinstance(live.store, SQLiteStore)
        # requests answered here / handed to the endpoint
        self.counts = counts if counts is not None else {"answered": 0, "passed": 0}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        path = scope.get("path") if scope["type"] == "http" else None
        if scope.get("method") != "POST" or path not in ("/events", "/recommend"):
            await self.app(scope, receive, send)
            return
        if not _json_body(scope["headers"]):
            await self.app(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        raw = b"".join(chunks)
        if path == "/events":
            answer = await self._event(raw)
        else:
            answer = await self._recommend(raw)
        if answer is not None:
            self.counts["answered"] += 1
            await _send_json(send, *answer)
            return
        self.counts["passed"] += 1
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": raw, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _event(self, raw: bytes) -> tuple[int, bytes] | None:
        from seqrec.live.store import make_event

        obj = _object(raw)
        if obj is None or not obj.keys() <= EVENT_FIELDS or "user" not in obj or "item" not in obj:
            return None
        user, item, when, eid = obj["user"], obj["item"], obj.get("time"), obj.get("id")
        if type(user) not in _ID or type(item) not in _ID:
            return None
        if (when is not None and type(when) not in _ID) or (
            eid is not None and type(eid) not in _ID
        ):
            return None
        try:
            event = make_event(user, item, when, eid, int(time.time()))
        except SeqRecError:  # the endpoint says why, as it always has
            return None
        try:
            return 200, _dumps(await self.writer.append([event]))
        except SeqRecError as exc:  # as the endpoint's HTTPException(422)
            return 422, _dumps({"detail": str(exc)})

    async def _recommend(self, raw: bytes) -> tuple[int, bytes] | None:
        obj = _object(raw)
        if obj is None or not obj.keys() <= RECOMMEND_FIELDS or type(obj.get("user")) not in _ID:
            return None
        k, exclude_seen = obj.get("k", 10), obj.get("exclude_seen", True)
        unknown_users = obj.get("unknown_users", "error")
        if type(k) is not int or not 1 <= k <= MAX_K or type(exclude_seen) is not bool:
            return None
        if unknown_users not in ("error", "empty"):
            return None
        try:
            args = ([obj["user"]], k, exclude_seen, None, None, unknown_users)
            if self.inline:
                (rec,) = self.live.recommend(*args)
            else:  # a store over the network: its round trips must not hold up the loop
                (rec,) = await asyncio.get_running_loop().run_in_executor(
                    None, self.live.recommend, *args
                )
        except SeqRecError as exc:
            return 422, _dumps({"detail": str(exc)})
        try:
            return 200, _dumps(self.body(rec))
        except ValueError:  # not JSON (a non-finite score): the endpoint answers as it does
            return None


def _json_body(headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether the request says its body is JSON (the app's ``_JsonBody`` rule, outside this
    middleware, has already turned a missing or form content type into JSON)."""
    for key, value in headers:
        if key.lower() == b"content-type":
            return value.split(b";")[0].strip().lower() == b"application/json"
    return False


def _object(raw: bytes) -> dict[str, Any] | None:
    try:
        obj = json.loads(raw)
    except ValueError:
        return None
    return obj if type(obj) is dict else None


def _dumps(content: Any) -> bytes:
    """JSON as Starlette's ``JSONResponse`` renders it."""
    return json.dumps(
        content, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")
    ).encode("utf-8")


async def _send_json(send: Any, status: int, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-length", str(len(body)).encode()), _JSON],
        }
    )
    await send({"type": "http.response.body", "body": body})
