"""``seqrec tune``: Optuna study shared by processes through one SQLite file."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import seqrec
from seqrec.cli.main import main
from seqrec.config import load_experiment
from seqrec.errors import ConfigError
from seqrec.testing.synthetic import markov_sequences, write_csv

optuna = pytest.importorskip("optuna")
from seqrec.tuning import dump_toml, load_space  # noqa: E402

SRC = Path(seqrec.__file__).resolve().parents[1]
SPACE = """
"train.lr" = {type = "float", low = 1e-3, high = 3e-2, log = true}
[model.dim]
type = "categorical"
choices = [8, 16]
"""


def _config(tmp_path: Path) -> Path:
    csv = tmp_path / "log.csv"
    write_csv(markov_sequences(n_users=40, n_items=15, seed=1), csv)
    cfg = tmp_path / "base.toml"
    cfg.write_text(
        dump_toml(
            {
                "data": {"name": str(csv), "filter": "none"},
                "model": {"name": "sasrec", "max_len": 8, "n_blocks": 1},
                "train": {"epochs": 3, "batch_size": 16, "num_threads": 1, "patience": 0},
                "output": str(tmp_path / "runs"),
            }
        )
    )
    (tmp_path / "space.toml").write_text(SPACE)
    return cfg


def test_space_is_validated(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('"train.lr" = {type = "float", low = 1.0, high = 0.1}')
    with pytest.raises(ConfigError, match="low < high"):
        load_space(path)
    path.write_text('"train.lr" = {type = "normal", low = 0.1, high = 1.0}')
    with pytest.raises(ConfigError, match="type must be"):
        load_space(path)
    path.write_text('"train.lr" = {type = "float", low = 0.1, high = 1.0, sigma = 2}')
    with pytest.raises(ConfigError, match="sigma"):
        load_space(path)
    path.write_text(SPACE)
    assert load_space(path) == {
        "train.lr": {"type": "float", "low": 1e-3, "high": 3e-2, "log": True},
        "model.dim": {"type": "categorical", "choices": [8, 16]},
    }


def test_unknown_key_in_space_fails_before_any_trial(tmp_path, capsys):
    cfg = _config(tmp_path)
    (tmp_path / "bad.toml").write_text('"model.depth" = {type = "int", low = 1, high = 2}')
    code = main(
        [
            "tune",
            str(cfg),
            "--space",
            str(tmp_path / "bad.toml"),
            "--trials",
            "2",
            "--storage",
            f"sqlite:///{tmp_path / 'bad.db'}",
        ]
    )
    assert code == 2 and "depth" in capsys.readouterr().err
    assert not (tmp_path / "bad.db").exists()


@pytest.mark.slow
def test_two_workers_share_one_sqlite_study_and_the_best_config_reloads(tmp_path, capsys):
    cfg = _config(tmp_path)
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    n_trials = 8
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
    }
    cmd = [
        sys.executable,
        "-m",
        "seqrec",
        "tune",
        str(cfg),
        "--space",
        str(tmp_path / "space.toml"),
        "--trials",
        str(n_trials),
        "--storage",
        storage,
        "--study",
        "shared",
    ]
    workers = [
        subprocess.Popen(
            cmd + ["--out", str(tmp_path / f"best{w}.toml")],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(2)
    ]
    outs = [w.communicate(timeout=300) for w in workers]
    for w, (_out, err) in zip(workers, outs, strict=True):
        assert w.returncode == 0, err[-3000:]

    study = optuna.load_study(study_name="shared", storage=storage)
    trials = study.trials
    numbers = [t.number for t in trials]
    assert sorted(numbers) == list(range(len(trials)))  # each trial recorded once
    # the budget is the study's total; two workers may each start one trial at the end
    assert n_trials <= len(trials) <= n_trials + 1
    done = [t for t in trials if t.state.is_finished()]
    assert len(done) == len(trials)
    assert {t.state for t in done} <= {
        optuna.trial.TrialState.COMPLETE,
        optuna.trial.TrialState.PRUNED,
    }
    # which worker ran how many is up to the race between them (on a loaded machine one may
    # start after the other has finished); a third process below must continue the study
    first_round = {t.user_attrs["worker"] for t in trials}
    for t in trials:  # pruning is driven by the trainer's validations
        assert 1 <= len(t.intermediate_values) <= 3
        if t.state == optuna.trial.TrialState.COMPLETE:
            assert len(t.intermediate_values) == 3 == t.user_attrs["epochs"]

    # another process joins the stored study: two more trials, numbered after the others
    more = subprocess.run(
        cmd[: cmd.index("--trials") + 1]
        + [str(len(trials) + 2)]
        + cmd[cmd.index("--trials") + 2 :]
        + ["--out", str(tmp_path / "best2.toml")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert more.returncode == 0, more.stderr[-3000:]
    study = optuna.load_study(study_name="shared", storage=storage)
    assert [t.number for t in study.trials] == list(range(len(trials) + 2))
    late = {t.user_attrs["worker"] for t in study.trials[len(trials) :]}
    assert len(late) == 1 and not late & first_round

    best = study.best_trial  # the last process wrote the best config of the whole study
    exp = load_experiment(tmp_path / "best2.toml")  # what `seqrec train -c` reads
    model_cfg = exp.model_config()
    assert model_cfg.lr == pytest.approx(best.params["train.lr"])
    assert model_cfg.dim == best.params["model.dim"] and model_cfg.max_len == 8
    assert f"best trial {best.number} " in (tmp_path / "best2.toml").read_text()

    # and training from it reproduces the best trial's validation score
    code = main(["train", "-c", str(tmp_path / "best2.toml"), "--out", str(tmp_path / "retrain")])
    assert code == 0
    rec = json.loads(next((tmp_path / "retrain").glob("result*.json")).read_text())
    assert rec["metrics"]["valid"]["NDCG@10"] == pytest.approx(best.value, abs=1e-9)


def test_every_model_but_pop_has_a_loadable_built_in_space(tmp_path):
    from seqrec.registry import model_names
    from seqrec.tuning import Objective, default_space, space_toml

    for model in model_names():
        if model == "pop":
            with pytest.raises(ConfigError, match="no built-in search space"):
                default_space(model)
            continue
        space = default_space(model)
        path = tmp_path / f"{model}.toml"
        path.write_text(space_toml(space))
        assert load_space(path) == space, model  # the file written for the user reads back
        Objective(None, [f"model.name={model}"], space, "NDCG@10")  # both corners are valid configs
    assert set(default_space("sasrec")) == {
        "train.lr",
        "model.dropout",
        "model.dim",
        "model.n_blocks",
    }
    assert set(default_space("puresvd")) == {"model.rank", "model.scaling"}


def test_tune_without_a_space_file_uses_and_writes_the_built_in_one(tmp_path, capsys):
    csv = tmp_path / "log.csv"
    write_csv(markov_sequences(n_users=40, n_items=15, seed=1), csv)
    out = tmp_path / "best.toml"
    code = main(
        [
            "tune",
            str(csv),
            "-m",
            "puresvd",
            "--set",
            "data.filter=none",
            "--trials",
            "3",
            "--seed",
            "0",
            "--storage",
            f"sqlite:///{tmp_path / 'study.db'}",
            "--out",
            str(out),
        ]
    )
    text = capsys.readouterr().out
    assert code == 0 and "puresvd's built-in one (model.rank, model.scaling)" in text
    assert set(load_space(tmp_path / "space.toml")) == {"model.rank", "model.scaling"}
    best = load_experiment(out)
    assert best.model == "puresvd" and 16 <= best.model_params["rank"] <= 512


@pytest.mark.filterwarnings(
    "ignore:Heartbeat of storage is supposed to be used with Study.optimize"
)
def test_a_trial_whose_process_died_is_failed_and_retried_once(tmp_path):
    """A killed tune left its trial RUNNING forever (shown in every later table); with the
    heartbeat, the next process marks it failed and re-runs its parameters once."""
    import time

    from seqrec.tuning import open_study

    url = f"sqlite:///{tmp_path / 'tune.db'}"
    study = open_study(url, "s", seed=0, heartbeat=1, stale_after=1)
    dead = study.ask({"x": optuna.distributions.FloatDistribution(0, 1)})
    study._storage.record_heartbeat(
        dead._trial_id
    )  # what the optimize loop of the dead process did
    time.sleep(2.5)
    again = open_study(url, "s", seed=0, heartbeat=1, stale_after=1)
    with pytest.warns(optuna.exceptions.ExperimentalWarning):  # what the next optimize() does first
        optuna.storages.fail_stale_trials(again)
    states = [t.state for t in again.trials]
    assert states[0] == optuna.trial.TrialState.FAIL
    assert states[1:] == [optuna.trial.TrialState.WAITING]  # queued again with its parameters
    assert again.trials[1].params == dead.params
