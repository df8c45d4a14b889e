"""HTTP service over a saved artifact (FastAPI).

(No ``from __future__ import annotations`` here: FastAPI reads the request model annotation
at runtime, and the model class is local to ``create_app``.)

    uvicorn "seqrec.serving.service:app_from_env" --factory   # SEQREC_ARTIFACT=runs/.../model

Endpoints: ``GET /health``, ``GET /info``, ``POST /recommend`` with
``{"history": [raw ids, oldest first], "k": 10, "exclude_seen": true}``.
"""


import os
from pathlib import Path
from typing import Any

from seqrec.errors import SeqRecError


def create_app(artifact: str | Path) -> Any:
    """A FastAPI app serving the recommender saved at ``artifact`` (loaded once)."""
    from fastapi import FastAPI, HTTPException
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from pydantic import BaseModel, Field

    from seqrec.models.base import Recommender

    model = Recommender.load(artifact)

    class RecommendRequest(BaseModel):
        history: list[int | str] = Field(default_factory=list, max_length=100_000)
        k: int = Field(10, ge=1, le=1000)
        exclude_seen: bool = True

    app = FastAPI(title="seqrec", description=f"{model.name} recommendations")

    @app.exception_handler(RequestValidationError)
    def invalid_request(request: Any, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's default echoes the offending input, which may not be JSON (a body of
        # Infinity): that turned a 422 into a 500. Location, message and type say enough.
        detail = [{"loc": [str(part) for part in err.get("loc", ())], "msg": str(err.get("msg", "")),
                   "type": str(err.get("type", ""))} for err in exc.errors()]
        return JSONResponse(status_code=422, content={"detail": detail})

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/info")
    def info() -> dict[str, Any]:
        return {"model": model.name, "n_items": model.n_items, "artifact": str(artifact)}

    @app.post("/recommend")
    def recommend(req: RecommendRequest) -> dict[str, Any]:
        try:
            (rec,) = model.recommend([req.history], k=req.k, exclude_seen=req.exclude_seen)
        except SeqRecError as exc:
            raise HTTPException(status_code=422, detail=str(exc)) from None
        titles = []
        if model.vocab is not None and model.vocab.titles is not None:
            titles = [model.vocab.title(int(i)) for i in model.vocab.encode(rec.items)]
        return {"items": [_jsonable(i) for i in rec.items], "scores": rec.scores,
                "titles": titles, "skipped_unknown": rec.skipped_unknown,
                "fallback": rec.fallback}

    return app


def _jsonable(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def app_from_env() -> Any:
    """App factory for ``uvicorn --factory``: the artifact path comes from $SEQREC_ARTIFACT."""
    path = os.environ.get("SEQREC_ARTIFACT")
    if not path:
        raise SeqRecError("set SEQREC_ARTIFACT to the directory of a saved model")
    return create_app(path)
