"""Config values are checked against their declared types, with the key and the type named."""

import dataclasses

import pytest

from seqrec.config import build_dataclass, coerce, load_experiment
from seqrec.errors import ConfigError
from seqrec.registry import model_names, settings_class


@pytest.mark.parametrize(
    "overrides, fragment",
    [
        (["seed=abc"], "seed must be an integer, got 'abc'"),
        (["data.min_rating=high"], "data.min_rating must be a number or none, got 'high'"),
        (["data.dedup=maybe"], "data.dedup must be a boolean"),
        (["data.dedup=1"], "data.dedup must be a boolean"),
        (["model.name=sasrec", "train.epochs=abc"], "train.epochs must be an integer, got 'abc'"),
        (["model.name=sasrec", "train.epochs=1.5"], "train.epochs must be an integer, got 1.5"),
        (["model.name=sasrec", "model.betas=[0.9]"], "model.betas must be a list of 2 numbers"),
        (["model.name=sasrec", "model.loss=7"], "loss must be one of"),
        (["model.name=puresvd", "model.rank=[1]"], "model.rank must be an integer"),
        (["eval.ks=[5, 'x']"], "eval.ks must be a list of integers"),
        (["split.refit=yes"], "split.refit must be a boolean"),
        (["data=3"], "[data] must be a section"),
        (["model.name=[1]"], "model.name must be a string"),
    ],
)
def test_wrong_types_are_config_errors(overrides, fragment):
    with pytest.raises(ConfigError) as info:
        load_experiment(None, overrides)
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_right_types_are_converted():
    exp = load_experiment(
        None,
        [
            "model.name=sasrec",
            "train.epochs=3.0",
            "model.lr=1",
            "data.min_rating=none",
            "eval.ks=10",
            "split.valid=100",
        ],
    )
    cfg = exp.model_config()
    assert cfg.epochs == 3 and type(cfg.epochs) is int
    assert cfg.lr == 1.0 and type(cfg.lr) is float
    assert exp.data.min_rating is None and exp.eval.ks == (10,) and exp.split.valid == "100"


def test_yaml_and_toml_syntax_errors(tmp_path):
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("data:\n  name: [unclosed\n")
    with pytest.raises(ConfigError, match="cannot parse"):
        load_experiment(bad_yaml)
    bad_toml = tmp_path / "bad.toml"
    bad_toml.write_text("[data\nname = 1\n")
    with pytest.raises(ConfigError, match="cannot parse"):
        load_experiment(bad_toml)
    bare = tmp_path / "bare.toml"  # YAML habits in TOML: an unquoted string
    bare.write_text("[model]\nname = sasrec\n")
    with pytest.raises(ConfigError, match='text values need quotes in TOML: name = "sasrec"'):
        load_experiment(bare)
    not_utf8 = tmp_path / "bin.toml"
    not_utf8.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigError, match="UTF-8"):
        load_experiment(not_utf8)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("3\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_experiment(scalar)


@pytest.mark.parametrize("name", model_names())
def test_every_model_config_field_rejects_a_wrong_type(name):
    """Generic: for every field of every registered config, a value of a clearly wrong type
    (a dict) is refused with the key in the message, and its default is accepted as is."""
    config_cls = settings_class(name)  # the model's fields and the training and run fields
    defaults = {
        f.name: f.default
        for f in dataclasses.fields(config_cls)
        if f.default is not dataclasses.MISSING
    }
    assert build_dataclass(config_cls, defaults, name) == config_cls()
    for field in dataclasses.fields(config_cls):
        with pytest.raises(ConfigError, match=field.name):
            build_dataclass(config_cls, {field.name: {"x": 1}}, name)


def test_coerce_rules():
    assert coerce(2.0, int, "k") == 2
    with pytest.raises(ConfigError):
        coerce(True, int, "k")
    with pytest.raises(ConfigError):
        coerce(float("inf"), int, "k")
    assert coerce("1e-3", float, "k") == 0.001
    assert coerce(None, float | None, "k") is None
    assert coerce([1, 2], tuple[int, ...], "k") == (1, 2)
    # a comma list from the command line (--set eval.ks=5,10), with or without brackets
    assert coerce("5,10", tuple[int, ...], "k") == (5, 10)
    assert coerce("[0.9, 0.98]", tuple[float, float], "k") == (0.9, 0.98)
    with pytest.raises(ConfigError):
        coerce("5,x", tuple[int, ...], "k")
