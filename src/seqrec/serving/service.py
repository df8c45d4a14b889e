"""HTTP service over a saved artifact (FastAPI).

(No ``from __future__ import annotations`` here: FastAPI reads the request model annotation
at runtime, and the model class is local to ``create_app``.)

    uvicorn "seqrec.serving.service:app_from_env" --factory   # SEQREC_ARTIFACT=runs/.../model
                                                              # (SEQREC_CORS=origin,origin,
                                                              #  SEQREC_API_KEY=key)

Endpoints: ``GET /health``, ``GET /info``, ``POST /recommend`` with
``{"history": [raw ids, oldest first], "k": 10, "exclude_seen": true}`` or ``{"user": id}``
(the user's history stored in the artifact), plus ``"times": [one per history item]`` for a model
that reads time (``/info`` lists its ``inputs``; without them such a model answers 422)
(``GET /recommend?user=42&k=5`` or
``?history=a,b,c`` takes the same fields as query parameters), and ``POST /recommend/batch`` with
``{"requests": [{"history": [...]} or {"user": id}, ...], "k": 10}`` (at most 1,000 requests,
answered in one scoring pass). Both take ``"allow": [ids]`` (recommend only these) and
``"deny": [ids]`` (never these). Each answer's ``"ranking"`` is ``"index"`` where the artifact's
item index answered (``seqrec index``; ``seqrec serve --exact`` turns it off), else ``"exact"``. Unknown user ids and allow/deny ids the model never saw are
a 422 naming them (``"unknown_users": "empty"`` answers unknown users with the empty history's
fallback ranking instead); unknown history ids are skipped and listed in ``skipped_ids``, each
with ``removed`` (filtered out by preprocessing) or ``never_seen``. Unknown request fields are a
422 naming the valid ones. A POST body without a JSON content type (``curl -d``'s default) is
read as JSON.

With an event store (``seqrec serve --events PATH_OR_URL``), ``POST /events`` takes
``{"user": id, "item": id, "time": t, "id": client-id}`` or ``{"events": [...]}`` (at most
10,000) and answers after they are durable; ``{"user": id}`` is then answered from the user's
stored history plus their events, and a user's first event creates them (seqrec.live).
"""

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, Literal

from seqrec.errors import SeqRecError


def create_app(
    artifact: str | Path,
    cors_origins: list[str] | None = None,
    api_key: str | None = None,
    events: str | None = None,
    state_cache: int = 10_000,
    exact: bool = False,
    fast_path: bool = True,
) -> Any:
    """A FastAPI app serving the recommender saved at ``artifact`` (loaded once);
    ``cors_origins``: web origins whose pages may call it from a browser (``["*"]``: any);
    ``api_key``: every endpoint that answers from the model then needs ``Authorization: Bearer KEY`` or
    ``X-API-Key: KEY`` (a 401 otherwise); ``events``: an event store (a file path or a
    ``redis://`` URL, :func:`seqrec.live.store.open_store`) that turns on ``POST /events`` and
    answers ``{"user": id}`` from the stored history plus the user's events, with the encoder
    states of ``state_cache`` users kept in memory (:class:`seqrec.live.session.Live`);
    ``fast_path``: with an event store, the plain ``/events`` and ``/recommend`` bodies are
    answered without the framework (:mod:`seqrec.serving.fast_path`; the same answers)."""
    from fastapi import Body, FastAPI, HTTPException, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

    from seqrec.models.base import Recommender
    from seqrec.models.incremental import incremental_encoder

    model = Recommender.load(artifact)
    if exact:  # `seqrec serve --exact`: the artifact's item index is not used
        model.index = None
    live = None
    if events is not None:
        from seqrec.live.session import Live

        live = Live(model, str(events), state_cache)

    # JSON's true / false are not numbers: pydantic's lax mode would read {"k": true} as k = 1
    # and a history [true] as item 1. Query parameters arrive as text and are not affected.
    def _no_bool(value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("expected a number or a string, got a boolean")
        return value

    Id = Annotated[int | str, BeforeValidator(_no_bool)]
    Count = Annotated[int, BeforeValidator(_no_bool)]

    # Unknown fields are refused: otherwise {"items": [...]} for {"history": [...]} would be an
    # empty history, answered with the popularity fallback as if that were what was asked.
    class Query(BaseModel):
        model_config = ConfigDict(extra="forbid")
        history: list[Id] = Field(default_factory=list, max_length=100_000)
        # one per history item (Unix seconds or ISO dates), for a model that reads time (/info)
        times: list[Id] | None = Field(None, max_length=100_000)
        user: Id | None = None

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid")
        k: Count = Field(10, ge=1, le=1000)
        exclude_seen: bool = True
        allow: list[Id] | None = Field(None, max_length=1_000_000)
        deny: list[Id] | None = Field(None, max_length=1_000_000)
        # "empty": a user id the artifact does not store gets the empty history's fallback
        # (popularity), like `seqrec recommend --input`; "error" (default): a 422 naming it
        unknown_users: Literal["error", "empty"] = "error"

    class RecommendRequest(Query, Options):
        pass

    class BatchRequest(Options):
        requests: list[Query] = Field(min_length=1, max_length=1000)

    class EventIn(BaseModel):
        model_config = ConfigDict(extra="forbid")
        user: Id
        item: Id
        # Unix seconds or an ISO date; left out: the time the service received it
        time: Id | None = None
        # a client id: an event re-sent with the same id (after a lost answer) is stored once
        id: Id | None = None

    class EventBatch(BaseModel):
        model_config = ConfigDict(extra="forbid")
        events: list[EventIn] = Field(min_length=1, max_length=10_000)

    app = FastAPI(
        title="seqrec", description=f"{model.name} recommendations", lifespan=_frozen_heap
    )
    app.state.fast_path = None
    if live is not None and fast_path:  # innermost: the key, CORS and JSON-body rules first
        from seqrec.live.writer import Writer
        from seqrec.serving.fast_path import FastPath

        app.state.fast_path = {"answered": 0, "passed": 0}
        app.add_middleware(
            FastPath,
            live=live,
            writer=Writer(live),
            body=lambda rec: _body(model, rec),
            counts=app.state.fast_path,
        )
    app.add_middleware(_JsonBody)
    if api_key:
        app.add_middleware(_ApiKey, key=api_key)
    if cors_origins:  # a shop's front end on another origin calls the API from the browser
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(cors_origins),
            allow_methods=["GET", "POST"],
            allow_headers=["content-type"],
        )
    app.state.example_query = _example_query(model)
    app.state.events = None if live is None else live.store.url
    app.state.live = live

    @app.exception_handler(RequestValidationError)
    def invalid_request(request: Any, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's default echoes the offending input, which may not be JSON (a body of
        # Infinity): that turned a 422 into a 500. Location, message and type say enough.
        detail = [
            {
                "loc": [str(part) for part in err.get("loc", ())],
                "msg": _message(err, request.url.path),
                "type": str(err.get("type", "")),
            }
            for err in exc.errors()
        ]
        return JSONResponse(status_code=422, content={"detail": detail})

    def _message(err: dict[str, Any], path: str) -> str:
        if err.get("type") == "extra_forbidden":  # name the fields that are valid there
            loc = [str(p) for p in err.get("loc", ())]
            if path.rstrip("/").endswith("/events"):
                fields = EventBatch.model_fields if "events" in loc else EventIn.model_fields
            elif path.rstrip("/").endswith("/batch"):
                fields = (Query if "requests" in loc else BatchRequest).model_fields
            else:
                fields = RecommendRequest.model_fields
            return f"unknown field {loc[-1]!r}; valid fields: {', '.join(fields)}"
        return str(err.get("msg", ""))

    @app.get("/")
    def index() -> dict[str, Any]:  # what a person opening the address in a browser sees
        endpoints = {
            "POST /recommend": '{"history": [item ids, oldest first]} or '
            '{"user": id}, optional "k", "exclude_seen", "allow", "deny", "unknown_users"',
            "GET /recommend": "?user=id or ?history=id,id,id (oldest first), &k=10, "
            "the other fields as for POST (lists comma-separated)",
            "POST /recommend/batch": '{"requests": [...], "k": ...}',
            "GET /info": "the model and its artifact",
            "GET /health": "liveness",
        }
        if live is not None:
            endpoints["POST /events"] = (
                '{"user": id, "item": id, "time": t, "id": client id} or {"events": [...]}'
            )
        return {
            "service": f"seqrec: {model.name} recommendations",
            "docs": "/docs",
            "endpoints": endpoints,
        }

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/info")
    def info() -> dict[str, Any]:
        return {
            "model": model.name,
            "n_items": model.n_items,
            "artifact": str(artifact),
            "inputs": ["items", "timestamps"] if model.reads_time else ["items"],
            # how a new event is absorbed (models.incremental): recurrent, kv-cache, re-encode
            "incremental": incremental_encoder(model).kind if live is None else live.kind,
            "events": None if live is None else live.info(),
        }

    @app.post("/events")
    def post_events(body: Annotated[dict[str, Any], Body()]) -> dict[str, Any]:
        """Append one event (``{"user", "item", "time", "id"}``) or a batch
        (``{"events": [...]}``); answers only once they are durable."""
        import time

        from seqrec.live.store import make_event

        kind = EventBatch if "events" in body else EventIn  # one model's errors, not a union's
        try:
            req = kind.model_validate(body)
        except ValidationError as exc:
            raise RequestValidationError(
                [{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]
            ) from None
        if live is None:
            raise HTTPException(
                status_code=404,
                detail="events are off: start the service with `seqrec serve ARTIFACT --events "
                "PATH_OR_URL` (a SQLite file or a redis:// URL)",
            )
        given = req.events if isinstance(req, EventBatch) else [req]
        now = int(time.time())
        try:
            evs = [make_event(e.user, e.item, e.time, e.id, now) for e in given]
            return live.append(evs)
        except SeqRecError as exc:
            raise HTTPException(status_code=422, detail=str(exc)) from None

    def answer(queries: list[Any], opts: Any) -> list[dict[str, Any]]:
        from seqrec.serving.batch import Request, recommend_requests

        if any(q.user is not None and q.history for q in queries):
            raise HTTPException(status_code=422, detail="give either 'history' or 'user', not both")
        if any(q.times is not None and q.user is not None for q in queries):
            raise HTTPException(
                status_code=422,
                detail="'times' goes with 'history', not with 'user' "
                "(a stored user's times are stored)",
            )
        reqs = [
            Request(q.user) if q.user is not None else Request(None, q.history, q.times)
            for q in queries
        ]
        # with an event store, a user's answer comes from their history now (live)
        by_live = [live is not None and q.user is not None for q in queries]
        recs: list[Any] = [None] * len(reqs)
        try:
            if any(by_live):
                users = [q.user for q, on in zip(queries, by_live, strict=True) if on]
                got = live.recommend(
                    users, opts.k, opts.exclude_seen, opts.allow, opts.deny, opts.unknown_users
                )
                for i in [i for i, on in enumerate(by_live) if on]:
                    recs[i] = got.pop(0)
            if not all(by_live):
                rest = [i for i, on in enumerate(by_live) if not on]
                got = recommend_requests(
                    model,
                    [reqs[i] for i in rest],
                    opts.k,
                    opts.exclude_seen,
                    opts.allow,
                    opts.deny,
                    unknown_users=opts.unknown_users,
                )
                for i, rec in zip(rest, got, strict=True):
                    recs[i] = rec
        except SeqRecError as exc:
            raise HTTPException(status_code=422, detail=str(exc)) from None
        return [_body(model, rec) for rec in recs]

    @app.post("/recommend")
    def recommend(req: RecommendRequest) -> dict[str, Any]:
        return answer([req], req)[0]

    @app.get("/recommend")
    def recommend_get(request: Request) -> dict[str, Any]:
        # a browser / `curl URL?user=42&k=5`: the POST body's fields as query parameters,
        # lists comma-separated (history=a,b,c); validated by the same model
        fields: dict[str, Any] = {}
        for key, value in request.query_params.items():
            fields[key] = [v for v in value.split(",") if v] if key in _LIST_FIELDS else value
        try:
            req = RecommendRequest.model_validate(fields)
        except ValidationError as exc:
            raise RequestValidationError(
                [{**e, "loc": ("query", *e["loc"])} for e in exc.errors()]
            ) from None
        return answer([req], req)[0]

    @app.post("/recommend/batch")
    def recommend_batch(req: BatchRequest) -> dict[str, Any]:
        return {"results": answer(req.requests, req)}

    return app


_LIST_FIELDS = ("history", "times", "allow", "deny")


@asynccontextmanager
async def _frozen_heap(app: Any) -> AsyncIterator[None]:
    """At server start: collect, then move every object alive (the model, torch, the libraries:
    a few hundred thousand) out of the cyclic garbage collector's reach (``gc.freeze``). A full
    collection otherwise walks them all, a pause of a tenth of a second or more in the middle
    of requests; what requests allocate is still collected."""
    import gc

    gc.collect()
    gc.freeze()
    yield


def _example_query(model: Any) -> str:
    """A query string that works on this artifact (for the start-up line of ``seqrec serve``):
    a stored user, else the most popular item as a one-item history."""
    from urllib.parse import quote

    users = getattr(model, "user_histories", None)
    if users is not None and len(users):
        return f"user={quote(str(users.raw[0]))}&k=5"
    vocab, popularity = getattr(model, "vocab", None), getattr(model, "popularity", None)
    if vocab is not None and popularity is not None and len(popularity) > 1:
        top = int(popularity[1:].argmax()) + 1
        return f"history={quote(str(vocab.decode([top])[0]))}&k=5"
    return "k=5"


class _ApiKey:
    """ASGI middleware: requests other than ``/health`` (a load balancer's probe), the endpoint
    list and the API docs, and CORS preflights, must carry the key, as ``Authorization: Bearer KEY`` or ``X-API-Key: KEY``;
    compared in constant time."""

    # no model answer behind these: liveness, the endpoint list and the API docs
    OPEN = ("/health", "/", "/docs", "/docs/oauth2-redirect", "/openapi.json")

    def __init__(self, app: Any, key: str) -> None:
        self.app, self.key = app, key.encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        import hmac

        if (
            scope["type"] == "http"
            and scope["path"] not in self.OPEN
            and scope["method"] != "OPTIONS"
        ):
            headers = dict(scope["headers"])
            given = headers.get(b"x-api-key") or headers.get(b"authorization", b"").removeprefix(
                b"Bearer "
            )
            if not hmac.compare_digest(given, self.key):
                from fastapi.responses import JSONResponse

                response = JSONResponse(
                    status_code=401,
                    content={
                        "detail": "missing or wrong API key: send 'Authorization: Bearer KEY' or 'X-API-Key: KEY'"
                    },
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


class _JsonBody:
    """ASGI middleware: a POST body sent without a JSON content type is read as JSON.

    ``curl -d '{"user": 42}' URL`` sends ``application/x-www-form-urlencoded``, and FastAPI then
    answers "Input should be a valid dictionary" for a body that is valid JSON: the commonest
    first request. A body that is not JSON still gets FastAPI's JSON decode error."""

    _REPLACED = (b"application/x-www-form-urlencoded", b"text/plain")

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            headers = [
                (k, v)
                for k, v in scope["headers"]
                if k.lower() != b"content-type" or not v.lower().startswith(self._REPLACED)
            ]
            if not any(k.lower() == b"content-type" for k, _ in headers):
                scope = dict(scope, headers=[*headers, (b"content-type", b"application/json")])
        await self.app(scope, receive, send)


def _body(model: Any, rec: Any) -> dict[str, Any]:
    vocab = model.vocab
    titles: list[Any] = []
    if vocab is not None and vocab.titles is not None:
        titles = [vocab.title(int(i)) for i in vocab.encode(rec.items)]
    skipped = [
        {"id": _jsonable(i), "reason": "removed" if vocab.is_removed(i) else "never_seen"}
        for i in rec.skipped_ids
    ]
    return {
        "items": [_jsonable(i) for i in rec.items],
        "scores": rec.scores,
        "titles": titles,
        "skipped_unknown": rec.skipped_unknown,
        "skipped_ids": skipped,
        "fallback": rec.fallback,
        "ranking": rec.ranking,
    }


def _jsonable(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def app_from_env() -> Any:
    """App factory for ``uvicorn --factory``: the artifact path comes from $SEQREC_ARTIFACT
    (and the event store from $SEQREC_EVENTS, its state cache size from $SEQREC_STATE_CACHE;
    $SEQREC_EXACT=1: rank every item even if the artifact has an item index;
    $SEQREC_FAST_PATH=0: the live requests through FastAPI too, for comparison)."""
    path = os.environ.get("SEQREC_ARTIFACT")
    if not path:
        raise SeqRecError("set SEQREC_ARTIFACT to the directory of a saved model")
    cors = [o.strip() for o in os.environ.get("SEQREC_CORS", "").split(",") if o.strip()]
    exact = os.environ.get("SEQREC_EXACT", "") not in ("", "0")  # as `seqrec serve --exact`
    fast = os.environ.get("SEQREC_FAST_PATH", "1") != "0"  # 0: every request through FastAPI
    return create_app(
        path,
        cors,
        os.environ.get("SEQREC_API_KEY") or None,
        os.environ.get("SEQREC_EVENTS") or None,
        int(os.environ.get("SEQREC_STATE_CACHE", "10000")),
        exact=exact,
        fast_path=fast,
    )
