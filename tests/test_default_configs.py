"""Every registered model runs with its default config on the default dataset
(ml-latest-small, default preprocessing and split), on a tiny training budget: only the
budget fields are overridden, never a size or rank."""

import math

import pytest

from seqrec.config import load_experiment
from seqrec.experiment import prepare_data, run_experiment
from seqrec.registry import model_names, settings_fields

# budget fields only: what bounds the run's length, not what shapes the model
BUDGET = {"epochs": 1, "max_train_seconds": 1.0, "max_iters": 1}


@pytest.fixture(scope="module")
def data():
    return prepare_data(load_experiment(None))


@pytest.mark.slow
@pytest.mark.parametrize("name", model_names())
def test_default_config_runs_on_default_dataset(name, data, tmp_path):
    valid = settings_fields(name)  # model, training and run keys
    overrides = [f"model.name={name}"] + [f"train.{k}={v}" for k, v in BUDGET.items() if k in valid]
    exp = load_experiment(None, overrides)
    model, record = run_experiment(exp, data=data, save_dir=tmp_path / "model")
    ndcg = record["metrics"]["test"]["NDCG@10"]
    assert math.isfinite(ndcg) and 0.0 <= ndcg <= 1.0
    assert model.n_items == data.prepared.n_items
    # raw ids of the shipped data (a model that reads time gets their times)
    times = [[1_000_000_000, 1_000_000_060, 1_000_000_120]] if model.reads_time else None
    recs = model.recommend([[1, 2, 3]], k=5, times=times)[0]
    assert len(recs.items) == 5
