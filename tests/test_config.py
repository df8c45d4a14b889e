import pytest

from seqrec.config import load_experiment, parse_value
from seqrec.errors import ConfigError
from seqrec.models.neural_config import settings


def test_overrides_and_unknown_keys(tmp_path):
    cfg = tmp_path / "exp.toml"
    cfg.write_text('[data]\nname = "ml-latest-small"\n[split]\nprotocol = "temporal"\n')
    exp = load_experiment(cfg, ["split.valid=2W", "eval.ks=[1, 10]"])
    assert exp.split.protocol == "temporal" and exp.split.valid == "2W"
    assert exp.eval.ks == (1, 10)
    with pytest.raises(ConfigError, match="valid keys"):
        load_experiment(cfg, ["data.nmae=x"])
    with pytest.raises(ConfigError, match="unknown section"):
        load_experiment(cfg, ["dta.name=x"])
    with pytest.raises(ConfigError, match="seen_filter"):
        load_experiment(cfg, ["eval.seen_filter=everything"])
    with pytest.raises(ConfigError, match="unknown model"):
        load_experiment(cfg, ["model.name=nosuchmodel"])
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        load_experiment(cfg, ["novalue"])


def test_yaml_and_missing_file(tmp_path):
    cfg = tmp_path / "exp.yaml"
    cfg.write_text("data:\n  filter: min_count\n")
    assert load_experiment(cfg).data.filter == "min_count"
    with pytest.raises(ConfigError, match="does not exist"):
        load_experiment(tmp_path / "nope.toml")
    assert parse_value("3") == 3 and parse_value("abc") == "abc" and parse_value("true") is True


def test_a_key_in_both_model_and_train_is_an_error(tmp_path):
    cfg = tmp_path / "exp.toml"
    cfg.write_text('[model]\nname = "sasrec"\nlr = 1e-3\n[train]\nlr = 3e-3\n')
    with pytest.raises(ConfigError, match="lr set in both"):
        load_experiment(cfg)


@pytest.mark.parametrize(
    "key, hint",
    [
        ("hidden_size", "RecBole's hidden_size is 'dim' here"),
        ("MAX_ITEM_LIST_LENGTH", "RecBole's MAX_ITEM_LIST_LENGTH is 'max_len' here"),
        ("session_max_len", "RecTools' session_max_len is 'max_len' here"),
        ("maxlen", "the SASRec code's maxlen is 'max_len' here"),
    ],
)
def test_another_librarys_name_for_a_field_gets_ours(key, hint):
    with pytest.raises(ConfigError, match=hint):
        load_experiment(None, ["model.name=sasrec", f"model.{key}=64"]).model_config()


def test_a_flat_recbole_yaml_is_recognised_and_its_keys_placed(tmp_path):
    cfg = tmp_path / "sasrec.yaml"
    cfg.write_text("hidden_size: 64\nMAX_ITEM_LIST_LENGTH: 50\n")
    with pytest.raises(ConfigError) as err:
        load_experiment(cfg)
    msg = str(err.value)
    assert msg.startswith("this looks like a config of RecBole: seqrec's has sections")
    assert (
        "RecBole's hidden_size is 'dim' here: dim = ... goes in a section: [model] dim = ..." in msg
    )
    assert "[model] max_len = ..., --set max_len=..." in msg


def test_run_settings_have_their_own_section_and_older_files_keep_loading(tmp_path):
    """Placement and the time budget are written under [run] (as the fields declare); a file
    that keeps them under [train], as older ones did, loads the same, and --set overrides the
    key where the file has it."""
    from seqrec.config import section_of

    assert section_of("num_threads") == "run" and section_of("max_train_seconds") == "run"
    assert section_of("lr") == "train" and section_of("epochs") == "train"
    new, old = tmp_path / "new.toml", tmp_path / "old.toml"
    new.write_text('[model]\nname = "sasrec"\n[train]\nepochs = 2\n[run]\nnum_threads = 1\n')
    old.write_text('[model]\nname = "sasrec"\n[train]\nepochs = 2\nnum_threads = 1\n')
    assert load_experiment(new).model_config() == load_experiment(old).model_config()
    assert load_experiment(new).param_names["num_threads"] == "run.num_threads"
    for path in (new, old):
        for key in ("num_threads=3", "run.num_threads=3", "train.num_threads=3"):
            assert load_experiment(path, [key]).model_config().num_threads == 3
    both = tmp_path / "both.toml"
    both.write_text('[model]\nname = "sasrec"\n[train]\nnum_threads = 1\n[run]\nnum_threads = 2\n')
    with pytest.raises(ConfigError, match=r"num_threads set in both \[train\] and \[run\]"):
        load_experiment(both)
    with pytest.raises(ConfigError, match="unknown key"):
        load_experiment(None, ["run.dimm=3", "model.name=sasrec"])


def test_model_training_defaults_are_data_on_the_model_config():
    """A model's defaults of the training fields are its ``train_defaults`` mapping, applied
    when its TrainConfig is built (``TrainConfig.for_model``) and as the defaults of its flat
    settings; type, role and doc stay TrainConfig's, declared once. A model config holds
    model hyperparameters only."""
    from dataclasses import dataclass, fields

    from seqrec.config_fields import BUDGET, role
    from seqrec.models.gru4rec import GRU4RecConfig
    from seqrec.models.neural_config import (
        SLIDING_RECIPE,
        NeuralConfig,
        RunConfig,
        TrainConfig,
        settings_class,
    )
    from seqrec.models.sasrec import SASRecConfig

    sasrec = TrainConfig.for_model(SASRecConfig)
    assert sasrec.lr == SASRecConfig.train_defaults["lr"] == 3e-3
    assert settings(SASRecConfig).lr == 3e-3 and settings(SASRecConfig, lr=1e-3).lr == 1e-3
    assert role(settings_class(SASRecConfig), "patience") == BUDGET
    assert (
        GRU4RecConfig.train_defaults is SLIDING_RECIPE
        and TrainConfig.for_model(GRU4RecConfig).train_windows == "sliding"
    )
    assert TrainConfig().lr == 1e-3  # the shared default is untouched
    model_fields = {f.name for f in fields(SASRecConfig)}
    assert not model_fields & {f.name for f in fields(TrainConfig) + fields(RunConfig)}
    with pytest.raises(TypeError):
        SASRecConfig(epochs=2)  # a training field is not a model config's

    @dataclass(frozen=True)
    class Mine(NeuralConfig):
        train_defaults = {"lr": 0.5}
        dim: int = 4

    assert TrainConfig.for_model(Mine).lr == 0.5 and Mine().dim == 4
    with pytest.raises(TypeError, match="dim are not training fields"):

        @dataclass(frozen=True)
        class Bad(NeuralConfig):
            train_defaults = {"dim": 8}
            dim: int = 4

    with pytest.raises(TypeError, match="lr set both as a field and in train_defaults"):

        @dataclass(frozen=True)
        class Twice(NeuralConfig):
            train_defaults = {"lr": 0.5}
            lr: float = 0.1

    with pytest.raises(TypeError, match="epochs are training / run fields"):

        @dataclass(frozen=True)
        class Mixed(NeuralConfig):
            epochs: int = 3


def test_seqrec_config_says_which_inputs_a_model_reads():
    from seqrec.config_dump import default_config_toml

    assert "# Reads: each history's items and their timestamps" in default_config_toml("hstu")
    assert "# Reads: each history's items." in default_config_toml("sasrec")
