"""``seqrec demo`` trains its neural models under an epoch budget, never a wall-clock one, so
that the same seed gives the same table on a free and on a loaded machine; ``--max-seconds``
is the only, explicit, way to add a time cap."""

import pytest

from seqrec.cli.demo import DEMO_MODELS, DEMO_PARAMS, _budget_text, demo_params
from seqrec.cli.main import main
from seqrec.registry import settings_class, settings_fields

# a neural config is one with the trainer's stop rules
NEURAL = [m for m in DEMO_MODELS if "max_train_seconds" in settings_fields(m)]


def test_the_demo_has_the_three_neural_models():
    # guards the test below against passing on an empty list
    assert {"sasrec", "lrurec", "hstu"} <= set(NEURAL)


@pytest.mark.parametrize("name", NEURAL)
def test_demo_neural_params_contain_no_wall_clock_cap(name):
    params = demo_params(name)
    clock_keys = [
        k
        for k in {**DEMO_PARAMS.get(name, {}), **params}
        if "second" in k or "deadline" in k or "time" in k
    ]
    assert clock_keys == []
    cfg = settings_class(name)(**params)
    # the resolved config (the model's default included) must not bring a cap back either
    assert cfg.max_train_seconds == 0
    assert 0 < cfg.epochs <= 500
    assert cfg.patience > 0


def test_max_seconds_is_an_opt_in_cap_for_neural_models_only():
    assert demo_params("sasrec", max_seconds=45.0)["max_train_seconds"] == 45.0
    assert "max_train_seconds" not in demo_params("puresvd", max_seconds=45.0)
    assert "max_train_seconds" not in demo_params("sasrec")


def test_the_budget_is_printed_before_training():
    text = _budget_text(settings_class("sasrec")(**demo_params("sasrec")))
    assert f"at most {DEMO_PARAMS['sasrec']['epochs']} epochs" in text
    assert "validations without a better NDCG@10" in text and " s of training" not in text
    capped = _budget_text(settings_class("sasrec")(**demo_params("sasrec", max_seconds=45.0)))
    assert "at most 45 s of training" in capped
    assert _budget_text(settings_class("puresvd")(**demo_params("puresvd"))) == ""


def test_negative_max_seconds_is_rejected(tmp_path, capsys):
    code = main(["demo", "--models", "pop", "--max-seconds", "-1", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert "--max-seconds must be >= 0" in err and "-1" in err


@pytest.mark.slow
def test_the_same_seed_gives_the_same_table(tmp_path):
    """The demo's promise, on demo-sized data (the shipped dataset, its neural models, two
    epochs): two runs, one on one torch thread and one on two, give identical metrics."""
    import json
    import os
    import subprocess
    import sys

    tables = []
    for threads in ("1", "2"):
        out = tmp_path / f"demo{threads}"
        env = {**os.environ, "OMP_NUM_THREADS": threads}
        subprocess.run(
            [
                sys.executable,
                "-m",
                "seqrec.cli.main",
                "demo",
                "--quick",
                "--models",
                "sasrec,lrurec,hstu",
                "--out",
                str(out),
            ],
            env=env,
            check=True,
            capture_output=True,
        )
        tables.append(
            {
                m: json.loads((out / m / "result.json").read_text())["metrics"]
                for m in ("sasrec", "lrurec", "hstu")
            }
        )
    assert tables[0] == tables[1]
    assert all(t["test"]["NDCG@10"] > 0 for t in tables[0].values())  # real numbers, not empty
