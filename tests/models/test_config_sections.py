"""A neural model is built from three configs (model, training, run); the flat settings of the
three (files, ``--set``, ``model.json``, run identities) split into them."""

import dataclasses
import json

import pytest

from seqrec.errors import ConfigError
from seqrec.models.bert4rec import BERT4Rec, BERT4RecConfig
from seqrec.models.neural_config import (
    RunConfig,
    TrainConfig,
    flat_settings,
    settings,
    settings_class,
    split_settings,
)
from seqrec.models.sasrec import SASRec, SASRecConfig
from seqrec.testing.synthetic import leave_last_out_small, markov_sequences


def test_a_model_takes_its_three_configs_or_their_flat_settings():
    train = TrainConfig.for_model(SASRecConfig, epochs=2)  # SASRec's training defaults
    model = SASRec(SASRecConfig(dim=8), train, RunConfig(num_threads=1))
    assert model.config == SASRecConfig(dim=8)
    assert model.train_config.epochs == 2 and model.run_config.num_threads == 1
    flat = settings(SASRecConfig, dim=8, epochs=2, num_threads=1)
    assert flat.parts == (model.config, model.train_config, model.run_config)
    assert model.settings == flat
    same = SASRec(flat)
    assert (same.config, same.train_config, same.run_config) == flat.parts
    # without a training config a model trains with its own defaults (train_defaults)
    assert SASRec(SASRecConfig()).train_config == TrainConfig.for_model(SASRecConfig)
    assert SASRec(SASRecConfig()).train_config.lr == SASRecConfig.train_defaults["lr"]
    # a TrainConfig built directly has the shared defaults, not the model's
    assert SASRec(SASRecConfig(), TrainConfig(epochs=2)).train_config.lr == TrainConfig().lr
    with pytest.raises(ConfigError, match="flat settings already hold"):
        SASRec(flat, TrainConfig())


def test_split_settings_puts_each_key_in_its_section():
    model, train, run = split_settings(
        SASRecConfig, {"dim": 8, "max_len": 20, "lr": 0.1, "device": "cpu", "typo": 1}
    )
    assert model == {"dim": 8, "max_len": 20, "typo": 1}  # unknown keys: the model refuses them
    assert train == {"lr": 0.1} and run == {"device": "cpu"}
    names = {f.name for f in dataclasses.fields(settings_class(SASRecConfig))}
    assert names == (
        {f.name for f in dataclasses.fields(SASRecConfig)}
        | {f.name for f in dataclasses.fields(TrainConfig)}
        | {f.name for f in dataclasses.fields(RunConfig)}
    )
    with pytest.raises(TypeError):
        settings(SASRecConfig, typo=1)


def test_checks_that_need_model_and_training_are_the_models_hook():
    with pytest.raises(ConfigError, match="not supported by bert4rec"):
        BERT4Rec(BERT4RecConfig(), TrainConfig.for_model(BERT4RecConfig, batch_size=0))
    sliding = TrainConfig(train_windows="sliding", window_stride=2)
    with pytest.raises(ConfigError, match="not supported by bert4rec"):
        BERT4Rec(BERT4RecConfig(), dataclasses.replace(sliding, batch_size=256))
    with pytest.raises(ConfigError, match=r"window_stride must be in \[0, max_len=1\]"):
        SASRec(SASRecConfig(max_len=1), sliding)
    SASRec(SASRecConfig(max_len=4), sliding)  # a stride within the window trains


def test_the_artifact_stores_the_flat_settings_and_loads_them_back(tmp_path):
    from seqrec.models.base import Recommender

    train, valid, _ = leave_last_out_small(markov_sequences(n_users=24, n_items=12, seed=0))
    model = SASRec(
        SASRecConfig(dim=8, n_blocks=1, max_len=6), TrainConfig(epochs=1), RunConfig(num_threads=1)
    ).fit(train, valid, progress=False)
    model.save(tmp_path / "m")
    stored = json.loads((tmp_path / "m" / "model.json").read_text())["config"]
    assert stored["epochs"] == 1 and stored["dim"] == 8 and stored["num_threads"] == 1
    loaded = Recommender.load(tmp_path / "m")
    assert loaded.settings == model.settings and loaded.train_config.epochs == 1
    assert flat_settings(loaded.config, loaded.train_config, loaded.run_config) == model.settings
