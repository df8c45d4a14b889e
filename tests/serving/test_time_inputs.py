"""A model trained with time gets the histories' times in every path (Python, CLI single and
batch, HTTP) or refuses: scored by positions alone, HSTU loses accuracy without a word."""

import json

import numpy as np
import polars as pl
import pytest

from seqrec.cli.main import main
from seqrec.errors import DataError
from seqrec.models.base import Recommender
from seqrec.testing.synthetic import write_log_csv


def _train(tmp_path, name, extra=()):
    write_log_csv(tmp_path / "log.csv", n_users=30, n_items=20, time_unit="s")
    out = tmp_path / name
    assert (
        main(
            [
                "train",
                "--set",
                f"data.name={tmp_path / 'log.csv'}",
                "--set",
                "data.columns=user=customer,item=sku,timestamp=event_ms",
                "--set",
                "model.name=hstu",
                "--set",
                "train.epochs=1",
                "--set",
                "model.dim=8",
                "--set",
                "model.max_len=10",
                *extra,
                "--out",
                str(out),
            ]
        )
        == 0
    )
    return out / "model"


@pytest.fixture(scope="module")
def hstu(tmp_path_factory):
    return _train(tmp_path_factory.mktemp("hstu"), "run")


def test_the_artifact_says_it_reads_time_and_python_refuses_without(hstu):
    assert json.loads((hstu / "model.json").read_text())["inputs"] == ["items", "timestamps"]
    model = Recommender.load(hstu)
    assert model.reads_time
    with pytest.raises(DataError, match="trained with timestamps"):
        model.recommend([["sku1", "sku2"]])
    t0 = 1_609_459_200
    near = model.recommend([["sku1", "sku2"]], k=5, times=[[t0, t0 + 60]])[0]
    far = model.recommend([["sku1", "sku2"]], k=5, times=[[t0, t0 + 86400 * 300]])[0]
    assert near.scores != far.scores  # the times are read
    iso = model.recommend(
        [["sku1", "sku2"]], k=5, times=[["2021-01-01T00:00:00", "2021-01-01T00:01:00"]]
    )[0]
    assert iso.scores == near.scores
    with pytest.raises(DataError, match="2 items and 1 times"):
        model.recommend([["sku1", "sku2"]], times=[[t0]])


def test_cli_single_and_stored_users(hstu, capsys):
    assert main(["recommend", str(hstu), "sku1", "sku2"]) == 2
    assert "--times" in capsys.readouterr().err
    assert (
        main(
            ["recommend", str(hstu), "sku1", "sku2", "--times", "1609459200,1609459260", "-k", "3"]
        )
        == 0
    )
    assert len([ln for ln in capsys.readouterr().out.splitlines() if ln[:1].isdigit()]) == 3
    assert main(["recommend", str(hstu), "--user", "c3", "-k", "3"]) == 0  # stored times


def test_batch_files(hstu, tmp_path, capsys):
    (tmp_path / "h.csv").write_text("user,history\nx,sku1 sku2\n")
    assert main(["recommend", str(hstu), "--input", str(tmp_path / "h.csv")]) == 2
    assert "comes without them" in capsys.readouterr().err
    (tmp_path / "h.csv").write_text("user,history,times\nx,sku1 sku2,1609459200 1609459260\n")
    assert (
        main(
            [
                "recommend",
                str(hstu),
                "--input",
                str(tmp_path / "h.csv"),
                "--output",
                str(tmp_path / "o.csv"),
            ]
        )
        == 0
    )
    (tmp_path / "long.csv").write_text(
        "user,item,timestamp\nx,sku1,1609459200\nx,sku2,1609459260\n"
    )
    assert (
        main(
            [
                "recommend",
                str(hstu),
                "--input",
                str(tmp_path / "long.csv"),
                "--output",
                str(tmp_path / "p.csv"),
            ]
        )
        == 0
    )
    assert (
        pl.read_csv(tmp_path / "o.csv")["item"].to_list()
        == pl.read_csv(tmp_path / "p.csv")["item"].to_list()
    )


def test_http(hstu):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from seqrec.serving.service import create_app

    client = TestClient(create_app(hstu))
    assert client.get("/info").json()["inputs"] == ["items", "timestamps"]
    resp = client.post("/recommend", json={"history": ["sku1", "sku2"]})
    assert resp.status_code == 422 and "timestamps" in resp.json()["detail"]
    ok = client.post(
        "/recommend", json={"history": ["sku1", "sku2"], "times": [1609459200, 1609459260], "k": 3}
    )
    assert ok.status_code == 200 and len(ok.json()["items"]) == 3
    assert (
        client.get("/recommend?history=sku1,sku2&times=1609459200,1609459260&k=3").json()["items"]
        == ok.json()["items"]
    )
    assert client.post("/recommend", json={"user": "c3"}).status_code == 200
    assert client.post("/recommend", json={"user": "c3", "times": [1]}).status_code == 422


def test_a_file_order_clock_does_not_ask_for_times(tmp_path):
    model = Recommender.load(
        _train(tmp_path, "order", ["--set", "data.columns=user=customer,item=sku,timestamp=none"])
    )
    assert not model.reads_time and np.isfinite(model.recommend([["sku1", "sku2"]])[0].scores).all()
