"""The HTTP service answers over a saved artifact, with raw ids and titles."""

import numpy as np
import pytest

from seqrec.data.sequences import Sequences
from seqrec.data.vocab import ItemVocab
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
    index = client.get("/").json()  # the address opened in a browser says what to call
    assert index["docs"] == "/docs" and "POST /recommend" in index["endpoints"]
    for endpoint in index["endpoints"]:  # every endpoint it lists exists
        method, path = endpoint.split()
        body = {"requests": [{"history": [101]}]} if path.endswith("batch") else {"history": [101]}
        assert (
            client.request(method, path, json=body if method == "POST" else None).status_code == 200
        )
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


def test_get_with_query_parameters_and_a_body_without_json_content_type(artifact):
    """A browser's GET /recommend?history=..., and curl -d's form content type for a JSON body."""
    client = TestClient(create_app(artifact))
    post = client.post("/recommend", json={"history": [102, 999], "k": 2, "deny": [104]}).json()
    got = client.get("/recommend", params={"history": "102,999", "k": "2", "deny": "104"}).json()
    assert (got["items"], got["scores"], got["skipped_unknown"]) == (
        post["items"],
        post["scores"],
        1,
    )
    assert got["items"] and got["skipped_ids"] == [{"id": "999", "reason": "never_seen"}]  # as sent
    app = create_app(artifact)  # the example `seqrec serve` prints works on this artifact
    assert app.state.example_query == "history=102&k=5"  # no stored users: the most popular item
    assert TestClient(app).get(f"/recommend?{app.state.example_query}").status_code == 200
    err = client.get("/recommend", params={"hist": "102"})
    assert err.status_code == 422 and err.json()["detail"][0]["loc"] == ["query", "hist"]
    assert client.get("/recommend", params={"k": "x"}).status_code == 422
    for content_type in ("application/x-www-form-urlencoded", "text/plain", None):
        headers = {"content-type": content_type} if content_type else {}
        resp = client.post(
            "/recommend", content=b'{"history": [102, 999], "k": 2, "deny": [104]}', headers=headers
        )
        assert resp.status_code == 200 and resp.json() == post, content_type
    bad = client.post(
        "/recommend",
        content=b"user=7",
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert bad.status_code == 422 and bad.json()["detail"][0]["type"] == "json_invalid"


def test_unknown_fields_are_refused_with_the_valid_ones(artifact):
    """{"items": [...]} for {"history": [...]} was an empty history answered by popularity."""
    client = TestClient(create_app(artifact))
    resp = client.post("/recommend", json={"items": [101], "k": 2})
    assert resp.status_code == 422
    (err,) = resp.json()["detail"]
    assert err["loc"] == ["body", "items"] and "unknown field 'items'" in err["msg"]
    assert "history" in err["msg"] and "user" in err["msg"]
    errs = client.post(
        "/recommend/batch", json={"requests": [{"history": [101], "k": 1}], "kk": 1}
    ).json()["detail"]
    msgs = {tuple(e["loc"]): e["msg"] for e in errs}
    assert (
        msgs[("body", "requests", "0", "k")]
        == "unknown field 'k'; valid fields: history, times, user"
    )
    assert "requests" in msgs[("body", "kk")] and "unknown field 'kk'" in msgs[("body", "kk")]


def test_unknown_users_are_a_422_or_get_the_fallback_when_asked(trained):
    client = TestClient(create_app(trained[0]))
    body = {"requests": [{"user": "nobody"}], "k": 2}
    resp = client.post("/recommend/batch", json=body)
    assert resp.status_code == 422 and "nobody" in resp.json()["detail"]
    (result,) = client.post("/recommend/batch", json=body | {"unknown_users": "empty"}).json()[
        "results"
    ]
    assert result["fallback"] == "popularity" and len(result["items"]) == 2
    assert (
        client.post("/recommend", json={"user": "nobody", "unknown_users": "maybe"}).status_code
        == 422
    )


def test_non_json_numbers_are_a_422_not_a_500(artifact):
    """Found by the fuzz test: FastAPI echoed the input (Infinity) into its 422 body, which
    failed to serialise and became a 500."""
    client = TestClient(create_app(artifact), raise_server_exceptions=False)
    for body in (b"Infinity", b'{"history": [NaN], "k": 2}', b'{"history": [1], "k": Infinity}'):
        resp = client.post("/recommend", content=body, headers={"content-type": "application/json"})
        assert resp.status_code == 422, (body, resp.status_code, resp.text)
        assert resp.json()["detail"][0]["msg"]


@pytest.fixture()
def trained(tmp_path):
    """SASRec trained by `seqrec train` on a CSV with string ids (k-core removes two items)."""
    from seqrec.cli.main import main
    from seqrec.testing.synthetic import write_log_csv

    info = write_log_csv(tmp_path / "log.csv", n_users=30, n_items=20, time_unit="s")
    out = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "--set",
                f"data.name={tmp_path / 'log.csv'}",
                "--set",
                "data.columns=user=customer,item=sku,timestamp=event_ms",
                "--set",
                "model.name=sasrec",
                "--set",
                "train.epochs=1",
                "--set",
                "model.dim=8",
                "--set",
                "model.max_len=10",
                "--set",
                "train.num_threads=1",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    return out / "model", info


def test_batch_endpoint_matches_single_requests_and_stored_users(trained):
    artifact, info = trained
    client = TestClient(create_app(artifact))
    queries = [{"history": ["sku1", "sku2"]}, {"user": "c4"}, {"history": []}]
    resp = client.post("/recommend/batch", json={"requests": queries, "k": 4})
    assert resp.status_code == 200
    results = resp.json()["results"]
    assert len(results) == 3
    for query, got in zip(queries, results, strict=True):
        single = client.post("/recommend", json={**query, "k": 4}).json()
        assert got["items"] == single["items"]
    model = Recommender.load(artifact)
    (direct,) = model.recommend(model.user_histories.raw_histories(["c4"], model.vocab), k=4)
    assert results[1]["items"] == [str(i) for i in direct.items]
    assert results[2]["fallback"] == "popularity"


def test_allow_deny_and_unknown_ids_over_http(trained):
    artifact, info = trained
    client = TestClient(create_app(artifact))
    allow = ["sku3", "sku4", "sku5"]
    body = client.post("/recommend", json={"history": ["sku1"], "k": 10, "allow": allow}).json()
    assert body["items"] and set(body["items"]) <= set(allow)
    full = client.post("/recommend", json={"history": ["sku1"], "k": 3}).json()["items"]
    denied = client.post("/recommend", json={"history": ["sku1"], "k": 3, "deny": full[:1]}).json()
    assert full[0] not in denied["items"] and denied["items"][0] == full[1]
    resp = client.post("/recommend", json={"history": ["sku1"], "allow": ["sku1", "nope"]})
    assert resp.status_code == 422 and "nope" in resp.json()["detail"]
    resp = client.post("/recommend", json={"user": "ghost"})
    assert resp.status_code == 422 and "ghost" in resp.json()["detail"]
    skipped = client.post("/recommend", json={"history": ["sku1", info["rare"][0], "zzz"]}).json()
    assert skipped["skipped_ids"] == [
        {"id": info["rare"][0], "reason": "removed"},
        {"id": "zzz", "reason": "never_seen"},
    ]
    assert client.post("/recommend/batch", json={"requests": []}).status_code == 422
    both = client.post("/recommend", json={"user": "c1", "history": ["sku1"]})
    assert both.status_code == 422


def test_cors_lets_a_named_origin_call_from_a_browser(artifact):
    shop = "https://shop.example"
    client = TestClient(create_app(artifact, [shop]))
    pre = client.options(
        "/recommend",
        headers={
            "Origin": shop,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type",
        },
    )
    assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == shop
    got = client.get("/recommend?history=102", headers={"Origin": shop})
    assert got.headers["access-control-allow-origin"] == shop
    other = client.get("/recommend?history=102", headers={"Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in other.headers
    plain = TestClient(create_app(artifact)).get("/recommend?history=102", headers={"Origin": shop})
    assert "access-control-allow-origin" not in plain.headers  # off unless asked


def test_an_api_key_guards_every_endpoint_but_health(artifact):
    client = TestClient(create_app(artifact, api_key="s3cret"))
    for open_path in ("/health", "/", "/openapi.json"):  # a probe, the endpoint list, the docs
        assert client.get(open_path).status_code == 200, open_path
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"X-API-Key": "s3cre"}):
        resp = client.get("/recommend?history=102", headers=headers)
        assert resp.status_code == 401 and "API key" in resp.json()["detail"]
    assert client.post("/recommend", json={"history": [102]}).status_code == 401
    for headers in ({"Authorization": "Bearer s3cret"}, {"X-API-Key": "s3cret"}):
        assert client.get("/recommend?history=102", headers=headers).status_code == 200
        assert client.get("/info", headers=headers).json()["n_items"] == 4


def test_json_booleans_are_not_numbers(artifact):
    """pydantic's lax mode read {"k": true} as k = 1 and a history [true] as item 1."""
    client = TestClient(create_app(artifact))
    for body in (
        {"history": [102], "k": True},
        {"history": [True]},
        {"history": [102], "allow": [False]},
        {"requests": [{"history": [102]}], "k": False},
    ):
        path = "/recommend/batch" if "requests" in body else "/recommend"
        resp = client.post(path, json=body)
        assert resp.status_code == 422, (body, resp.text)
        assert "boolean" in resp.json()["detail"][0]["msg"]
    assert client.post("/recommend", json={"history": [102], "k": 2}).status_code == 200
    assert client.get("/recommend?history=102&k=2").status_code == 200  # text from a query string


def test_serve_on_port_zero_prints_the_port_it_got(artifact):
    """`seqrec serve --port 0` took a free port but printed http://localhost:0."""
    import re
    import subprocess
    import sys
    import time
    import urllib.request

    proc = subprocess.Popen(
        [sys.executable, "-m", "seqrec.cli.main", "serve", str(artifact), "--port", "0"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        banner = proc.stderr.readline()
        port = int(re.search(r"http://localhost:(\d+) ", banner).group(1))
        assert port > 0, banner
        for _ in range(100):  # uvicorn starts accepting a moment after the banner
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as resp:
                    assert resp.status == 200
                    break
            except OSError:
                time.sleep(0.1)
        else:
            raise AssertionError(f"nothing answers on the printed port {port}")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
