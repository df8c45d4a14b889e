"""``seqrec update RUN NEW_LOG``: new users and items, a new artifact version that serves, the
previous version kept, and an interrupted update that leaves the artifact as it was."""

from __future__ import annotations

import json
import os
import signal

import numpy as np
import pytest
import torch

from seqrec.cli.main import main
from seqrec.serving.artifact import load_recommender
from seqrec.testing.synthetic import write_log_csv

BASE = 1_700_000_000


def _train(tmp_path, model: str = "sasrec"):
    write_log_csv(tmp_path / "log.csv", n_users=30, n_items=20, time_unit="s")
    out = tmp_path / "run"
    argv = ["train", "--set", f"data.name={tmp_path / 'log.csv'}"]
    argv += ["--set", "data.columns=user=customer,item=sku,timestamp=event_ms"]
    argv += ["--set", f"model.name={model}"]
    if model != "puresvd":
        argv += ["--set", "train.epochs=1", "--set", "model.dim=8", "--set", "model.max_len=10"]
        argv += ["--set", "run.num_threads=1"]
    else:
        argv += ["--set", "model.rank=4"]
    assert main([*argv, "--out", str(out)]) == 0
    return out


def _new_log(path):
    rows = ["customer,sku,event_ms,channel"]
    rows += [f"c1,skuNEW1,{BASE + 1},web", f"c1,sku3,{BASE + 2},web", f"c2,skuNEW2,{BASE + 3},app"]
    rows += [f"cNEW,sku1,{BASE + 4},app", f"cNEW,skuNEW1,{BASE + 5},app"]
    rows += [f"cNEW,skuNEW2,{BASE + 6},app"]
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("model", ["sasrec", "puresvd"])
def test_update_grows_the_run_keeps_the_old_version_and_serves(tmp_path, capsys, model):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from seqrec.serving.service import create_app

    run = _train(tmp_path, model)
    old = load_recommender(run / "model")
    old_meta = (run / "model" / "model.json").read_bytes()
    capsys.readouterr()
    assert main(["update", str(run), str(_new_log(tmp_path / "new.csv")), "--epochs", "1"]) == 0
    out = capsys.readouterr()
    # what it used and what it ignored
    assert "used 6 new event(s): 2 known user(s), 1 new user(s), 2 new item(s)" in out.err
    assert "channel" in out.err  # the column it did not use is named
    assert "version 2" in out.out
    meta = json.loads((run / "model" / "model.json").read_text())
    assert meta["version"] == 2
    assert (run / "model.v1" / "model.json").read_bytes() == old_meta  # the previous version
    assert load_recommender(run / "model.v1").n_items == old.n_items
    new = load_recommender(run / "model")
    assert new.artifact_version == 2 and new.n_items == old.n_items + 2
    assert new.vocab.raw[-2:].tolist() == ["skuNEW1", "skuNEW2"]
    assert new.vocab.encode(old.vocab.raw.tolist()).tolist() == list(range(1, old.n_items + 1))
    hist = new.user_histories
    assert "cNEW" in hist and len(hist) == len(old.user_histories) + 1
    (c1,) = hist.raw_histories(["c1"], new.vocab)
    (c1_old,) = old.user_histories.raw_histories(["c1"], old.vocab)
    assert c1 == [*c1_old, "skuNEW1", "sku3"]
    assert new.popularity[-2:].tolist() == [2.0, 2.0]
    # the updated artifact serves: a new user, and a history of new items
    client = TestClient(create_app(run / "model"))
    resp = client.get("/recommend?user=cNEW&k=3")
    assert resp.status_code == 200, resp.text
    resp = client.post("/recommend", json={"history": ["skuNEW1", "sku2"], "k": 5})
    assert resp.status_code == 200 and resp.json()["skipped_unknown"] == 0
    # a second update counts on
    assert main(["update", str(run), str(tmp_path / "new.csv"), "--epochs", "1"]) == 0
    assert json.loads((run / "model" / "model.json").read_text())["version"] == 3
    assert json.loads((run / "model.v2" / "model.json").read_text())["version"] == 2


def _snapshot(directory):
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_sigterm_mid_update_leaves_the_previous_artifact(tmp_path, monkeypatch, capsys):
    from seqrec.models.torch_recommender import TorchRecommender

    run = _train(tmp_path)
    before = _snapshot(run / "model")
    original = TorchRecommender.compute_loss
    steps = []

    def loss_then_sigterm(self, data):
        steps.append(1)
        if len(steps) == 2:
            os.kill(os.getpid(), signal.SIGTERM)  # as `kill` or a scheduler would
        return original(self, data)

    monkeypatch.setattr(TorchRecommender, "compute_loss", loss_then_sigterm)
    code = main(["update", str(run), str(_new_log(tmp_path / "new.csv")), "--epochs", "50"])
    assert code == 130 and "unchanged" in capsys.readouterr().err
    assert len(steps) == 2  # it stopped right after the step the signal arrived in
    assert _snapshot(run / "model") == before
    assert not (run / "model.v1").exists()
    model = load_recommender(run / "model")
    assert model.artifact_version == 1 and "cNEW" not in model.user_histories


def test_a_failure_while_saving_leaves_the_previous_artifact(tmp_path, monkeypatch):
    from seqrec.serving import artifact

    run = _train(tmp_path)
    before = _snapshot(run / "model")
    real = artifact.write_npz

    def fail_on_users(directory, name, arrays, files):
        if name == artifact.USERS:
            raise OSError(28, "No space left on device")
        return real(directory, name, arrays, files)

    monkeypatch.setattr(artifact, "write_npz", fail_on_users)
    new_log = _new_log(tmp_path / "new.csv")
    with pytest.raises(OSError, match="No space left"):
        main(["update", str(run), str(new_log), "--epochs", "1"])
    assert _snapshot(run / "model") == before
    loaded = load_recommender(run / "model")
    assert loaded.artifact_version == 1
    assert not [
        p for p in run.iterdir() if p.name.startswith(".") and p.name != ".lock"
    ]  # no staging left behind
    # the copy of version 1 made before the failure is reused by the next attempt
    monkeypatch.setattr(artifact, "write_npz", real)
    assert main(["update", str(run), str(new_log), "--epochs", "1"]) == 0
    assert _snapshot(run / "model.v1") == before


def test_update_refuses_bad_replay_and_an_empty_log(tmp_path, capsys):
    run = _train(tmp_path, "puresvd")
    new_log = _new_log(tmp_path / "new.csv")
    assert main(["update", str(run), str(new_log), "--replay", "2"]) == 2
    assert "replay must be 'all', 'none' or a share" in capsys.readouterr().err
    empty = tmp_path / "empty.csv"
    empty.write_text("customer,sku,event_ms\n")
    assert main(["update", str(run), str(empty)]) == 2
    assert not (run / "model.v1").exists()


def test_replay_shares_choose_the_users_trained_on(tmp_path):
    from seqrec.update import read_new_log, update_model

    run = _train(tmp_path, "puresvd")
    options = {"columns": {"user": "customer", "item": "sku", "timestamp": "event_ms"}}
    new = read_new_log(_new_log(tmp_path / "new.csv"), options)
    counts = {}
    for replay in ("none", 0.5, "all"):
        model = load_recommender(run / "model")
        others = len(model.user_histories) - 2  # c1 and c2 have new events
        report = update_model(model, new, replay=replay)
        counts[replay] = report.replayed_users
        assert report.training_users == 3 + report.replayed_users
    assert counts == {"none": 0, 0.5: round(0.5 * others), "all": others}
    # the refit gave the new items factors: a history with one scores them
    scores = model.score(_one(model))
    assert np.isfinite(scores[:, 1:]).all() and scores[0, -2] != 0


def _one(model):
    from seqrec.data.sequences import Sequences

    return Sequences.from_lists([[1, model.n_items]], n_items=model.n_items)


def test_a_stop_asked_during_a_refit_is_not_saved(tmp_path, monkeypatch, capsys):
    from seqrec import stop
    from seqrec.models.factorization.svd import PureSVD

    run = _train(tmp_path, "puresvd")
    before = _snapshot(run / "model")
    original = PureSVD.fit

    def fit_then_stop(self, train, valid=None):
        stop.request()  # a signal that arrives while the SVD runs (it cannot stop half-way)
        return original(self, train, valid)

    monkeypatch.setattr(PureSVD, "fit", fit_then_stop)
    assert main(["update", str(run), str(_new_log(tmp_path / "new.csv"))]) == 130
    assert "unchanged" in capsys.readouterr().err
    assert _snapshot(run / "model") == before and not stop.requested()


def test_update_gives_new_items_the_categories_the_model_trained_with(tmp_path, capsys):
    write_log_csv(tmp_path / "log.csv", n_users=30, n_items=20, time_unit="s")
    # names sort A < B < C in the training file, so their ids there are 1, 2, 3
    items = ["sku,title,genres"] + [f"sku{i},t{i},{'ABC'[i % 3]}" for i in range(1, 21)]
    (tmp_path / "items.csv").write_text("\n".join(items) + "\n")
    out = tmp_path / "run"
    argv = ["train", "--set", f"data.name={tmp_path / 'log.csv'}"]
    argv += ["--set", "data.columns=user=customer,item=sku,timestamp=event_ms"]
    argv += ["--set", f"data.item_file={tmp_path / 'items.csv'}"]
    argv += ["--set", "model.name=sasrec", "--set", "model.item_attributes=ids+attributes"]
    argv += ["--set", "model.dim=8"]
    argv += ["--set", "train.epochs=1", "--set", "model.max_len=10", "--set", "run.num_threads=1"]
    assert main([*argv, "--out", str(out)]) == 0
    old = load_recommender(out / "model")
    known = old.trained_category_ids()
    assert sorted(known) == ["A", "B", "C"]
    # the new file numbers its own names otherwise (B, C, Zed sorted: B would be 1 there)
    new_items = ["sku,title,genres", "skuNEW1,first new,C|Zed", "skuNEW2,second new,B"]
    (tmp_path / "new_items.csv").write_text("\n".join(new_items) + "\n")
    capsys.readouterr()
    argv = ["update", str(out), str(_new_log(tmp_path / "new.csv")), "--epochs", "1"]
    assert main([*argv, "--item-file", str(tmp_path / "new_items.csv")]) == 0
    err = capsys.readouterr().err
    assert "2 of 2 new item(s) scored from their categories" in err
    assert "left out 1 category name(s) the model never trained with (Zed)" in err
    new = load_recommender(out / "model")
    n1, n2 = new.vocab.encode(["skuNEW1", "skuNEW2"]).tolist()
    spec = new._attribute_spec
    assert spec.token_value[spec.tokens[n1][spec.tokens[n1] > 0]].tolist() == [known["C"]]
    assert spec.token_value[spec.tokens[n2][spec.tokens[n2] > 0]].tolist() == [known["B"]]
    assert new.vocab.title(n1) == "first new" and new.vocab.category(n2) == "B"
    assert new.trained_category_ids() == known  # a later update reads the same numbering
    # the grown item table has finite rows for the new items, each its own
    with torch.no_grad():
        table = new.encoder.item_emb.weight.numpy()
    assert np.isfinite(table[[n1, n2]]).all() and not np.allclose(table[n1], table[n2])


def test_category_ids_read_back_the_trained_numbering():
    from seqrec.models.item_attributes import AttributeSpec, category_ids

    # tokens 1..3 = (category, 2), (category, 1), (category, 9); item 3's text has two names
    spec = AttributeSpec(
        tokens=np.array([[0, 0], [1, 2], [1, 0], [3, 0]]),
        token_kind=np.array([0, 0, 0, 0]),
        token_value=np.array([0, 2, 1, 9]),
        kinds=["category"],
        known=np.ones(4, bool),
    )
    cats = np.array(["Drama|Action", "Drama", "X|Y"], object)
    assert category_ids(spec, cats) == {"Drama": 2, "Action": 1}
    assert category_ids(spec, None) == {}


def test_update_reads_new_items_vectors_from_the_item_file(tmp_path, capsys):
    write_log_csv(tmp_path / "log.csv", n_users=30, n_items=20, time_unit="s")
    rng = np.random.default_rng(0)
    rows = ["sku,emb"] + [
        f'sku{i},"{" ".join(f"{x:.3f}" for x in rng.normal(size=4))}"' for i in range(1, 21)
    ]
    (tmp_path / "items.csv").write_text("\n".join(rows) + "\n")
    out = tmp_path / "run"
    argv = ["train", "--set", f"data.name={tmp_path / 'log.csv'}"]
    argv += ["--set", "data.columns=user=customer,item=sku,timestamp=event_ms"]
    argv += ["--set", f"data.item_file={tmp_path / 'items.csv'}"]
    argv += ["--set", "data.item_columns=item=sku,vector=emb"]
    argv += ["--set", "model.name=sasrec", "--set", "model.item_attributes=ids+attributes"]
    argv += ["--set", "model.dim=8", "--set", "train.epochs=1", "--set", "model.max_len=10"]
    argv += ["--set", "run.num_threads=1"]
    assert main([*argv, "--out", str(out)]) == 0
    assert load_recommender(out / "model").item_vector_width == 4
    (tmp_path / "new_items.csv").write_text('sku,emb\nskuNEW1,"[1.0, 2.0, 3.0, 4.0]"\n')
    capsys.readouterr()
    argv = ["update", str(out), str(_new_log(tmp_path / "new.csv")), "--epochs", "1"]
    assert main([*argv, "--item-file", str(tmp_path / "new_items.csv")]) == 0
    assert "item vectors: 1 in the item file (4 values)" in capsys.readouterr().err
    new = load_recommender(out / "model")
    emb = new.encoder.item_emb
    n1, n2 = new.vocab.encode(["skuNEW1", "skuNEW2"]).tolist()
    scale = float(emb.vector_scale)
    np.testing.assert_allclose(emb.vectors[n1].numpy(), np.arange(1, 5) / scale, rtol=1e-6)
    assert not emb.vectors[n2].any()  # no vector given: adds nothing
    # a file whose vectors have another length is refused, the artifact unchanged
    (tmp_path / "bad_items.csv").write_text("sku,emb\nskuNEW2,1 2\n")
    before = _snapshot(out / "model")
    argv = ["update", str(out), str(_new_log(tmp_path / "new.csv")), "--epochs", "1"]
    assert main([*argv, "--item-file", str(tmp_path / "bad_items.csv")]) != 0
    assert "vectors have 2 values, the model was trained with 4" in capsys.readouterr().err
    assert _snapshot(out / "model") == before
