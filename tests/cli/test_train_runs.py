"""``seqrec train`` run directories: per-epoch progress, resume after an interrupt, --fresh,
no silent overwrite of another run; ``seqrec demo`` publishes only complete model folders;
``seqrec config`` prints a loadable default config."""

import json
import os
import subprocess
import sys

import pytest

from seqrec.cli import runs
from seqrec.cli.main import main
from seqrec.config import load_experiment
from seqrec.registry import model_names, settings_class
from seqrec.testing.synthetic import markov_sequences


@pytest.fixture(scope="module")
def csv_path(tmp_path_factory):
    seqs = markov_sequences(n_users=40, n_items=15, min_len=6, max_len=12, seed=1)
    path = tmp_path_factory.mktemp("data") / "log.csv"
    lines = ["user,item,timestamp"]
    for u in range(len(seqs)):
        for t, item in enumerate(seqs.items[seqs.offsets[u] : seqs.offsets[u + 1]]):
            lines.append(f"{u},{item},{1000 + t}")
    path.write_text("\n".join(lines) + "\n")
    return path


def _train_args(csv_path, out, epochs=3, *extra):
    return [
        "train",
        "--set",
        f"data.name={csv_path}",
        "--set",
        "data.filter=none",
        "--set",
        "model.name=sasrec",
        "--set",
        "model.dim=8",
        "--set",
        "model.n_heads=1",
        "--set",
        "train.max_len=10",
        "--set",
        "train.batch_size=8",
        "--set",
        f"train.epochs={epochs}",
        "--set",
        "train.patience=0",
        "--set",
        "train.num_threads=1",
        "--out",
        str(out),
        *extra,
    ]


def _run(capsys, argv):
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def _epochs(path):
    return [json.loads(line)["epoch"] for line in path.read_text().splitlines()]


def test_interrupted_train_resumes_exactly(csv_path, tmp_path, capsys, monkeypatch):
    code, _, err = _run(capsys, _train_args(csv_path, tmp_path / "ref"))
    assert code == 0, err
    reference = json.loads((tmp_path / "ref" / "result.json").read_text())

    real_call = runs.EpochPrinter.__call__

    def interrupt_at_epoch_2(self, rec):
        real_call(self, rec)
        if rec["epoch"] == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(runs.EpochPrinter, "__call__", interrupt_at_epoch_2)
    out = tmp_path / "run"
    code, _, err = _run(capsys, _train_args(csv_path, out))
    assert code == 130 and "rerun the same command to resume" in err
    assert (out / "checkpoint" / "last.pt").exists() and not (out / "model").exists()
    monkeypatch.setattr(runs.EpochPrinter, "__call__", real_call)

    code, text, err = _run(capsys, _train_args(csv_path, out))
    assert code == 0, err
    assert "resuming the run" in err and "epoch 1/3" not in err and "epoch 3/3" in err
    assert _epochs(out / "train-log.jsonl") == [1, 2, 3]
    pytest.importorskip("matplotlib")
    curve = out / "train-curve.png"  # the per-epoch log as a plot, across the resume too
    assert curve.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"training curve: {curve}" in text
    result = json.loads((out / "result.json").read_text())
    assert result["metrics"] == reference["metrics"]  # exact resume
    assert result["stopped"] == "epochs"


def test_other_run_is_never_overwritten(csv_path, tmp_path, capsys):
    out = tmp_path / "run"
    assert _run(capsys, _train_args(csv_path, out, 1))[0] == 0
    before = (out / "result.json").read_text()
    code, _, err = _run(capsys, _train_args(csv_path, out, 1, "--set", "model.dim=16"))
    assert code == 2 and str(out) in err and "model.dim" in err and "--fresh" in err
    assert len(err.strip().splitlines()) == 1
    assert (out / "result.json").read_text() == before
    code, _, err = _run(capsys, _train_args(csv_path, out, 1, "--set", "model.dim=16", "--fresh"))
    assert code == 0, err
    assert json.loads((out / "result.json").read_text())["config"]["model_config"]["dim"] == 16
    assert _epochs(out / "train-log.jsonl") == [1]
    # more epochs continue the same run (a budget field)
    code, _, err = _run(capsys, _train_args(csv_path, out, 2, "--set", "model.dim=16"))
    assert code == 0 and "resuming" in err and _epochs(out / "train-log.jsonl") == [1, 2]


def test_foreign_directory_is_refused(csv_path, tmp_path, capsys):
    other = tmp_path / "photos"
    other.mkdir()
    (other / "cat.jpg").write_bytes(b"\xff")
    code, _, err = _run(capsys, _train_args(csv_path, other, 1))
    assert code == 2 and "does not hold a seqrec train run" in err
    assert sorted(p.name for p in other.iterdir()) == ["cat.jpg"]


def test_a_second_trainer_in_the_same_run_directory_is_refused(csv_path, tmp_path, capsys):
    """Two `seqrec train` processes in one directory would interleave their checkpoints: the
    second is refused (with or without --fresh) while the first holds the run's lock."""
    out = tmp_path / "run"
    out.mkdir()
    holder = subprocess.Popen(  # a process that holds the lock the way a training run does
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; "
            "from seqrec.locks import lock_dir; fh = lock_dir(Path(sys.argv[1]), '.lock', 'busy'); "
            "print('locked', flush=True); time.sleep(60)",
            str(out),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        for extra in ((), ("--fresh",)):
            code, _, err = _run(capsys, _train_args(csv_path, out, 1, *extra))
            assert code == 2 and "in use by another seqrec train" in err, err
        assert not (out / "checkpoint").exists()
    finally:
        holder.kill()
        holder.wait()
    code, _, err = _run(capsys, _train_args(csv_path, out, 1))  # the holder is gone: it trains
    assert code == 0, err


@pytest.mark.slow
def test_progress_lines_when_not_a_terminal(csv_path, tmp_path):
    """Through a pipe (no terminal): one line per epoch with epoch i/N, loss, the validation
    metric and seconds; the stop reason in the table and the result file."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    res = subprocess.run(
        [sys.executable, "-m", "seqrec.cli.main", *_train_args(csv_path, tmp_path / "run", 2)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert res.returncode == 0, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if " epoch " in ln]
    assert len(lines) == 2, res.stderr
    for i, line in enumerate(lines, 1):
        assert f"epoch {i}/2" in line and "loss " in line and "NDCG@10 " in line
        assert line.rstrip().endswith("s")
    assert "stopped by" in res.stdout and "epoch limit" in res.stdout
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["stopped"] == "epochs"


@pytest.mark.slow
def test_sigterm_stops_train_like_ctrl_c_and_keeps_the_checkpoint(csv_path, tmp_path):
    """`kill`, a container stop or a preemption: the checkpoint stays and the message says how
    to resume (SIGTERM's default action ended the process without a word)."""
    import signal
    import time

    out = tmp_path / "run"
    argv = [sys.executable, "-m", "seqrec.cli.main", *_train_args(csv_path, out, 500)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while (
        not (out / "checkpoint" / "last.pt").exists()
        and time.time() < deadline
        and proc.poll() is None
    ):
        time.sleep(0.1)
    time.sleep(0.3)  # mid-epoch, past the first checkpoint
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted: checkpoint in" in err and "rerun the same command to resume" in err
    assert (
        out / "checkpoint" / "last.pt"
    ).exists()  # test_interrupted_train_resumes_exactly resumes it


def test_demo_interrupted_leaves_only_complete_model_folders(tmp_path, capsys, monkeypatch):
    import seqrec.experiment as experiment

    real = experiment.run_experiment
    calls = []

    def second_call_interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            # the interrupt lands after the model was saved: the staged folder stays hidden
            model, record = real(*args, **kwargs)
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(experiment, "run_experiment", second_call_interrupted)
    code, _, _ = _run(
        capsys, ["demo", "--quick", "--models", "pop,puresvd", "--out", str(tmp_path)]
    )
    assert code == 130
    visible = sorted(
        p.name for p in tmp_path.iterdir() if p.is_dir() and not p.name.startswith(".")
    )
    assert visible == ["pop"]
    assert (tmp_path / "pop" / "result.json").exists() and (
        tmp_path / "pop" / "model.json"
    ).exists()


def test_demo_on_your_own_file_compares_the_models_there(csv_path, tmp_path, capsys, monkeypatch):
    """`seqrec demo shop.csv`: the demo's table on the user's data, a model the data cannot
    train skipped with its reason, the hint naming a stored user; model settings refused."""
    import seqrec.experiment as experiment
    from seqrec.errors import DataError

    real = experiment.run_experiment

    def lrurec_cannot(exp, *args, **kwargs):
        if exp.model == "lrurec":
            raise DataError("no training sequence is long enough")
        return real(exp, *args, **kwargs)

    monkeypatch.setattr(experiment, "run_experiment", lrurec_cannot)
    monkeypatch.chdir(tmp_path)
    code, out, err = _run(
        capsys,
        [
            "demo",
            str(csv_path),
            "--quick",
            "--models",
            "pop,LRURec,sasrec",
            "--set",
            "data.filter=none",
        ],
    )
    assert code == 0, err
    assert out.startswith("log.csv: 40 users") and "skipped lrurec: no training sequence" in out
    table = out.split("test metrics", 1)[1]
    assert "pop " in table and "sasrec (ce)" in table and "lrurec" not in table
    assert "try: seqrec recommend runs/demo-log/sasrec --user 0" in out
    assert (tmp_path / "runs" / "demo-log" / "sasrec" / "model.json").exists()
    code, _, err = _run(capsys, ["demo", str(csv_path), "--set", "train.epochs=3"])
    assert code == 2 and "not a demo setting" in err


@pytest.mark.parametrize("name", model_names())
def test_config_command_prints_loadable_defaults(name, tmp_path, capsys):
    code, text, err = _run(capsys, ["config", name])
    assert code == 0, err
    path = tmp_path / "c.toml"
    path.write_text(text)
    exp = load_experiment(path)
    assert exp.model == name and exp.model_config() == settings_class(name)()
    assert exp.data == load_experiment(None).data and exp.eval == load_experiment(None).eval
    assert "# " in text  # field docs as comments
