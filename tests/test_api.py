"""``seqrec.train`` / ``seqrec.load``: the CLI's train in a few lines of Python."""

import json

import polars as pl
import pytest

import seqrec
from seqrec.errors import ConfigError
from seqrec.testing.synthetic import write_log_csv


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    path = tmp_path_factory.mktemp("api") / "shop.csv"
    write_log_csv(path, n_users=40, n_items=25, columns=("customer", "sku", "ts"), time_unit="s")
    return path


def test_train_evaluates_recommends_and_saves(log, tmp_path):
    run = seqrec.train(
        log,
        "sasrec",
        epochs=2,
        dim=16,
        max_len=10,
        num_threads=1,
        progress=False,
        data_options={"filter": "none"},
    )
    assert isinstance(run, seqrec.TrainedRun) and run.model.name == "sasrec"
    assert 0.0 <= run.metrics["NDCG@10"] <= 1.0 and "NDCG@10" in run.valid_metrics
    assert run.record["epochs"] == 2 and run.out is None
    # a notebook shows a line, not the whole record
    assert repr(run) == (
        f"TrainedRun(sasrec on shop, leave-last-out: test NDCG@10 {run.metrics['NDCG@10']:.4f}, "
        f"HR@10 {run.metrics['HR@10']:.4f}; 2 epoch(s), stopped by epochs)"
    )
    user = str(run.model.user_histories.raw[0])
    rec = run.recommend(user=user, k=3)
    assert len(rec.items) == 3 and all(isinstance(i, str) for i in rec.items)
    known = rec.items[0]
    by_history = run.recommend(history=[known, "no-such-sku"], k=2)
    assert by_history.skipped_unknown == 1 and known not in by_history.items  # seen items excluded
    with pytest.raises(ConfigError, match="one of user=ID or history"):
        run.recommend(k=2)
    # load gives back the object train gave: the README's next line works on it
    loaded = seqrec.load(run.save(tmp_path / "artifact"))
    assert type(loaded) is type(run) and loaded.recommend(user=user, k=3).items == rec.items
    assert loaded.recommend(history=[known], k=2).items == run.recommend(history=[known], k=2).items
    assert (
        loaded.model.recommend([[known]], k=2)[0].items
        == run.model.recommend([[known]], k=2)[0].items
    )
    assert (
        loaded.metrics == {} and loaded.n_items == run.model.n_items
    )  # no run directory: no record


def test_in_memory_table_and_run_directory(log, tmp_path, capsys):
    frame = pl.read_csv(log)
    run = seqrec.train(frame, "pop", data_options={"filter": "none"}, out=tmp_path / "run")
    same = seqrec.train(log, "pop", data_options={"filter": "none"})
    assert run.metrics == same.metrics  # the table is read like the file
    record = json.loads((tmp_path / "run" / "result.json").read_text())
    assert record["metrics"]["test"] == run.metrics and (tmp_path / "run" / "model").is_dir()
    loaded = seqrec.load(tmp_path / "run")  # the run directory stands for its artifact
    assert loaded.name == "pop" and loaded.metrics == run.metrics and loaded.out == tmp_path / "run"
    with pytest.raises(ConfigError, match="holds another run"):  # like seqrec train --out
        seqrec.train(frame, "puresvd", data_options={"filter": "none"}, out=tmp_path / "run")
    with pytest.raises(ConfigError, match=r"\['sep'\] apply to files"):
        seqrec.train(frame, "pop", data_options={"sep": ";"})
    with pytest.raises(ConfigError, match="did you mean 'epochs'"):
        seqrec.train(log, "sasrec", epochz=3)
