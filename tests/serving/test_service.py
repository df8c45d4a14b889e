"""The HTTP service answers over a saved artifact, with raw ids and titles."""

import numpy as np
import pytest

from seqrec.data.preprocess import ItemVocab
from seqrec.data.sequences import Sequences
from seqrec.models.base import Recommender
from seqrec.models.factorization.pop import Pop, PopConfig

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from seqrec.serving.service import create_app  # noqa: E402


@pytest.fixture()
def artifact(tmp_path):
    vocab = ItemVocab(np.array([101, 102, 103, 104]), np.array(["a", "b", "c", "d"], dtype=object))
    train = Sequences.from_lists([[1, 2, 2, 2], [2, 3, 4], [2, 4]], n_items=4, vocab=vocab)
    model = Pop(PopConfig()).fit(train)
    model.save(tmp_path / "pop")
    return tmp_path / "pop"


def test_recommend_endpoint(artifact):
    client = TestClient(create_app(artifact))
    assert client.get("/health").json() == {"status": "ok"}
    assert client.get("/info").json()["n_items"] == 4
    resp = client.post("/recommend", json={"history": [102, 999], "k": 2})
    body = resp.json()
    assert resp.status_code == 200
    assert body["items"] == [104, 101] or body["items"] == [104, 103]
    assert 102 not in body["items"]  # seen items excluded
    assert body["skipped_unknown"] == 1
    assert len(body["titles"]) == len(body["items"])
    # the service answers exactly what the loaded model answers
    (direct,) = Recommender.load(artifact).recommend([[102, 999]], k=2)
    assert body["items"] == [int(i) for i in direct.items]


def test_bad_request_is_rejected(artifact):
    client = TestClient(create_app(artifact))
    assert client.post("/recommend", json={"history": [101], "k": 0}).status_code == 422
    empty = client.post("/recommend", json={"history": [], "k": 2}).json()
    assert empty["fallback"] == "popularity" and empty["items"][0] == 102


def test_non_json_numbers_are_a_422_not_a_500(artifact):
    """Found by the fuzz test: FastAPI echoed the input (Infinity) into its 422 body, which
    failed to serialise and became a 500."""
    client = TestClient(create_app(artifact), raise_server_exceptions=False)
    for body in (b"Infinity", b'{"history": [NaN], "k": 2}', b'{"history": [1], "k": Infinity}'):
        resp = client.post("/recommend", content=body, headers={"content-type": "application/json"})
        assert resp.status_code == 422, (body, resp.status_code, resp.text)
        assert resp.json()["detail"][0]["msg"]
