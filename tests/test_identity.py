"""One run identity (``seqrec.identity``) for checkpoints, ``seqrec train`` run directories and
the reproduction cache, built on the roles the config fields declare (``seqrec.config_fields``).

The last test is the guarantee that matters most: every finished record in
``docs/reproduce/runs/`` is found, by the harness's own lookup, for the run its table's spec in
``configs/reproduce/*.toml`` produces today, so ``seqrec reproduce`` retrains none of them."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from seqrec.config import Experiment
from seqrec.config_fields import BUDGET, PLACEMENT, RESULT, names_with_role, role, stored_default
from seqrec.errors import ConfigError
from seqrec.identity import (
    differences,
    experiment_identity,
    run_identity,
    run_key,
    same_run,
    training_part,
)
from seqrec.models.bert4rec import BERT4RecConfig
from seqrec.models.neural_config import RunConfig, TrainConfig, settings, settings_class
from seqrec.models.sasrec import SASRecConfig

ROOT = Path(__file__).resolve().parents[1]


def test_roles_are_declared_once_and_inherited_by_subclasses_that_change_a_default():
    assert names_with_role(TrainConfig, BUDGET) == ("epochs", "patience")
    assert names_with_role(RunConfig, BUDGET) == ("max_train_seconds",)
    assert set(names_with_role(RunConfig, PLACEMENT)) == {
        "ce_chunk",
        "device",
        "num_threads",
        "eval_batch_size",
    }
    assert not names_with_role(TrainConfig, PLACEMENT)
    # the flat settings of SASRec: its train_defaults change min_epoch_steps (default 100) and
    # patience; roles and legacy values stay those TrainConfig declares
    flat = settings_class(SASRecConfig)
    assert flat().min_epoch_steps == 100 and stored_default(flat, "min_epoch_steps") == 0
    assert role(flat, "patience") == BUDGET and role(flat, "dim") == RESULT
    assert names_with_role(flat, BUDGET) == ("epochs", "patience", "max_train_seconds")
    assert names_with_role(flat, PLACEMENT) == names_with_role(RunConfig, PLACEMENT)
    # no legacy declared: a missing field reads as the class's default
    assert stored_default(flat, "l2_norm") is False


def test_identity_leaves_placement_out_and_the_key_leaves_budget_and_eval_out():
    a = run_identity(
        "sasrec",
        settings(SASRecConfig, dim=8, num_threads=4, device="cpu", epochs=5),
        seed=0,
        eval={"ks": [10]},
    )
    assert "num_threads" not in a["model_config"] and a["model_config"]["epochs"] == 5
    b = run_identity(
        "sasrec",
        settings(SASRecConfig, dim=8, epochs=50, patience=3, max_train_seconds=60.0),
        seed=0,
        eval={"ks": [20]},
    )
    assert not same_run(a, b, SASRecConfig) and same_run(a, b, SASRecConfig, training_only=True)
    assert run_key(a, SASRecConfig) == run_key(b, SASRecConfig)
    assert "eval" not in training_part(a, SASRecConfig)
    c = run_identity("sasrec", SASRecConfig(dim=16), seed=0, eval={"ks": [10]})
    assert run_key(c, SASRecConfig) != run_key(a, SASRecConfig)
    assert differences(a, c, SASRecConfig, training_only=True) == ["model.dim"]
    assert differences(a, {**c, "seed": 1}, SASRecConfig, training_only=True) == [
        "seed",
        "model.dim",
    ]


def test_a_missing_field_reads_as_its_legacy_value_and_inert_fields_are_skipped():
    new = run_identity("sasrec", settings(SASRecConfig, batch_size=0, min_epoch_steps=0), seed=0)
    old = {
        **new,
        "model_config": {
            k: v
            for k, v in new["model_config"].items()
            if k not in ("min_epoch_steps", "auto_batch_max")
        },
    }
    assert same_run(old, new, SASRecConfig)
    today = run_identity(
        "sasrec", settings(SASRecConfig, batch_size=0), seed=0
    )  # min_epoch_steps=100
    assert differences(old, today, SASRecConfig) == ["model.min_epoch_steps"]
    # with a given batch the automatic batch's fields are inert
    given = run_identity("sasrec", settings(SASRecConfig, batch_size=64, batch_targets=7), seed=0)
    assert same_run(
        given, run_identity("sasrec", settings(SASRecConfig, batch_size=64), seed=0), SASRecConfig
    )
    # BERT4Rec's output head was added later: records without it trained the transform head
    b = run_identity("bert4rec", BERT4RecConfig(), seed=0)
    stored = {**b, "model_config": {k: v for k, v in b["model_config"].items() if k != "output"}}
    assert same_run(stored, b, BERT4RecConfig)
    assert not same_run(
        stored, run_identity("bert4rec", BERT4RecConfig(output="tied"), seed=0), BERT4RecConfig
    )


def test_a_missing_fingerprint_matches_any_stored_one():
    a = run_identity("sasrec", SASRecConfig(), fingerprint="abc")
    assert same_run(a, {**a, "fingerprint": None}, SASRecConfig)
    assert not same_run(a, {**a, "fingerprint": "abd"}, SASRecConfig)


def test_checkpoints_and_run_directories_use_the_same_rule(tmp_path):
    from seqrec.cli.runs import prepare_run_dir
    from seqrec.training.checkpoint import claim_run_dir as _check_same_config

    cfg = settings(SASRecConfig, dim=8)
    _check_same_config(tmp_path / "ck", cfg, "sasrec", 10)
    _check_same_config(
        tmp_path / "ck", dataclasses.replace(cfg, epochs=3, num_threads=2), "sasrec", 10
    )
    with pytest.raises(ConfigError, match="differs in model.dim"):
        _check_same_config(tmp_path / "ck", dataclasses.replace(cfg, dim=16), "sasrec", 10)
    with pytest.raises(ConfigError, match="n_items"):
        _check_same_config(tmp_path / "ck", cfg, "sasrec", 11)

    exp = Experiment(model="sasrec", model_params={"dim": 8, "epochs": 2})
    out = tmp_path / "run"
    _, lock = prepare_run_dir(out, exp, fresh=False)
    lock.close()
    (out / "checkpoint").mkdir()  # it trained
    stored = json.loads((out / "experiment.json").read_text())["identity"]
    assert stored == experiment_identity(exp)
    more = dataclasses.replace(exp, model_params={"dim": 8, "epochs": 20, "num_threads": 1})
    _, lock = prepare_run_dir(out, more, fresh=False)  # a larger budget continues it
    lock.close()
    other = dataclasses.replace(exp, model_params={"dim": 16, "epochs": 2})
    with pytest.raises(ConfigError, match="differs in model.dim"):
        prepare_run_dir(out, other, fresh=False)


def _table_names() -> list[str]:
    return sorted(p.stem for p in (ROOT / "configs" / "reproduce").glob("*.toml"))


def test_every_finished_record_is_found_by_its_tables_run(monkeypatch, tmp_path):
    """``seqrec reproduce`` plans each table (``harness.plan``: identity, key, cached result) and
    trains what it finds no finished record for. Planned here over every table, with each
    dataset's fingerprint taken from its records (the data need not be on this machine), every
    finished record in docs/reproduce/runs/ is some run's cached result: none would retrain."""
    from seqrec.errors import DataUnavailable
    from seqrec_lab import harness, runner
    from seqrec_lab.spec import load_table

    results = ROOT / "docs" / "reproduce" / "runs"
    finished = {
        p.name: json.loads(p.read_text())
        for p in sorted(results.glob("*.json"))
        if not p.name.endswith(".partial.json")
    }
    assert finished, "no records to check"
    fingerprints: dict[str, str] = {}
    for rec in finished.values():
        fingerprints[json.dumps(rec["identity"]["data"], sort_keys=True)] = rec["identity"][
            "fingerprint"
        ]

    def prepared_data(spec):
        data = json.dumps(
            json.loads(json.dumps(spec.experiment.data.identity(), default=str)), sort_keys=True
        )
        if data not in fingerprints:
            raise DataUnavailable(f"no record of {spec.dataset}")
        return SimpleNamespace(prepared=SimpleNamespace(fingerprint=lambda: fingerprints[data]))

    monkeypatch.setattr(runner, "prepared_data", prepared_data)
    monkeypatch.chdir(ROOT)  # load_table reads configs/reproduce relative to the working directory

    def signature(rec):
        return rec.get("key"), json.dumps(rec["identity"], sort_keys=True), rec.get("created")

    found = set()
    for name in _table_names():
        table = load_table(name)
        found |= {
            signature(p.cached)
            for p in harness.plan(table, table.runs, tmp_path / "runs", results)
            if p.cached is not None
        }
    missed = [name for name, rec in finished.items() if signature(rec) not in found]
    assert not missed, f"{len(missed)} finished record(s) would retrain: {missed[:10]}"
