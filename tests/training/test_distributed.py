"""Data-parallel training under ``torchrun`` (2 CPU processes, gloo, tiny synthetic data).

Tolerance of "same metrics as one process": with full cross-entropy and no dropout a 2-process
run computes the gradient of the same global-batch mean loss, so only the floating-point
summation order differs. Validation metrics must agree to 1e-6 and the logged training loss
to a relative 1e-5; a resumed 2-process run must equal the uninterrupted one exactly.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import seqrec
from seqrec.errors import ConfigError
from seqrec.models.neural_config import settings
from seqrec.models.sasrec import SASRec, SASRecConfig
from seqrec.testing.synthetic import leave_last_out_small, markov_sequences, write_csv
from seqrec.training.distributed import DistContext, shard
from seqrec.training.trainer import effective_lr

DRIVER = Path(__file__).with_name("ddp_driver.py")
SRC = Path(seqrec.__file__).resolve().parents[1]
# batch 9 over 50 rows: the last global batch has 5 rows, so ranks get unequal shards (3 / 2)
TINY = dict(
    max_len=10,
    dim=16,
    n_blocks=1,
    batch_size=9,
    lr=3e-3,
    num_threads=1,
    seed=3,
    epochs=3,
    patience=0,
    dropout=0.0,
    train_windows="last",
)


def _env(**extra: str) -> dict:
    return {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        **extra,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
    }


def torchrun(
    nproc: int, *args: str, check: bool = True, env: dict | None = None
) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={nproc}",
        *args,
    ]
    proc = subprocess.run(cmd, env=env or _env(), capture_output=True, text=True, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(f"torchrun failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc


def _drive(
    out: Path,
    kwargs: dict,
    ckdir: Path | None,
    kill_at: int = 0,
    check: bool = True,
    env: dict | None = None,
):
    out.mkdir(parents=True, exist_ok=True)
    return torchrun(
        2,
        str(DRIVER),
        str(out),
        "sasrec",
        repr(kwargs),
        "-" if ckdir is None else str(ckdir),
        str(kill_at),
        check=check,
        env=env,
    )


def test_shards_are_contiguous_and_cover_the_global_batch():
    rows = np.arange(5)
    parts = [shard(rows, DistContext(r, 2, r, "gloo")) for r in range(2)]
    np.testing.assert_array_equal(np.concatenate(parts), rows)
    assert [len(p) for p in parts] == [3, 2]
    assert len(shard(np.arange(1), DistContext(1, 2, 1, "gloo"))) == 0  # runs with weight 0
    np.testing.assert_array_equal(shard(rows, None), rows)


def test_learning_rate_rule_is_explicit():
    assert effective_lr(settings(SASRecConfig, lr=1e-3, batch_size=256)) == 1e-3
    cfg = settings(SASRecConfig, lr=1e-3, batch_size=512, lr_rule="linear", lr_base_batch=128)
    assert effective_lr(cfg) == pytest.approx(4e-3)
    cfg = settings(SASRecConfig, lr=1e-3, batch_size=512, lr_rule="sqrt", lr_base_batch=128)
    assert effective_lr(cfg) == pytest.approx(2e-3)
    with pytest.raises(ConfigError, match="lr_rule"):
        settings(SASRecConfig, lr_rule="cubic")


@pytest.mark.slow
def test_two_processes_match_one_and_a_killed_run_resumes_exactly(tmp_path):
    both = _drive(tmp_path / "two", TINY, tmp_path / "two" / "ck")
    two = json.loads((tmp_path / "two" / "result.json").read_text())
    assert two["world_size"] == 2, both.stderr

    train, valid, test = leave_last_out_small(markov_sequences(n_users=50, n_items=20, seed=5))
    one = SASRec(settings(SASRecConfig, **TINY)).fit(train, valid, progress=False)
    hist = one.training_log.history
    assert one.training_log.global_step == two["global_step"] == 3 * 6
    assert len(hist) == len(two["history"]) == 3
    for a, b in zip(hist, two["history"], strict=True):
        for name, value in a["metrics"].items():
            assert b["metrics"][name] == pytest.approx(value, abs=1e-6), name
        assert b["train_loss"] == pytest.approx(a["train_loss"], rel=1e-5)
    np.testing.assert_allclose(two["scores"], one.score(test.histories())[:, 1:], atol=1e-4)

    # rank 1 SIGKILLs itself at global step 8; torchrun tears the group down
    killed = _drive(tmp_path / "killed", TINY, tmp_path / "killed" / "ck", kill_at=8, check=False)
    assert killed.returncode != 0
    assert not (tmp_path / "killed" / "result.json").exists()
    assert (tmp_path / "killed" / "ck" / "last.pt").exists()
    _drive(tmp_path / "killed", TINY, tmp_path / "killed" / "ck")
    resumed = json.loads((tmp_path / "killed" / "result.json").read_text())
    assert resumed["resumed_from_step"] and 0 < resumed["resumed_from_step"] <= 8
    assert resumed["history"] == two["history"]  # every validation identical
    assert resumed["scores"] == two["scores"]


@pytest.mark.slow
def test_torchrun_seqrec_train_writes_one_result_on_rank_0(tmp_path):
    """``torchrun -m seqrec train`` on a CSV: rank 0 alone evaluates and writes, and the
    result records the world size, the global and per-rank batch and the learning rate."""
    csv = tmp_path / "log.csv"
    write_csv(markov_sequences(n_users=40, n_items=15, seed=1), csv)
    out = tmp_path / "run"
    sets = [
        f"data.name={csv}",
        "data.filter=none",
        "model.name=sasrec",
        "model.max_len=8",
        "model.dim=16",
        "model.n_blocks=1",
        "train.epochs=2",
        "train.batch_size=16",
        "train.lr=1e-3",
        "train.lr_rule='linear'",
        "train.lr_base_batch=8",
    ]
    argv = ["-m", "seqrec", "train", "--out", str(out)]
    for s in sets:
        argv += ["--set", s]
    proc = torchrun(2, *argv)
    records = list(out.glob("result*.json"))
    assert len(records) == 1, proc.stdout + proc.stderr
    rec = json.loads(records[0].read_text())
    assert rec["training"] == {
        "world_size": 2,
        "global_batch": 16,
        "per_rank_batch": 8,
        "lr_rule": "linear",
        "lr": pytest.approx(2e-3),
    }
    assert rec["epochs"] == 2 and 0.0 <= rec["metrics"]["test"]["NDCG@10"] <= 1.0
    assert proc.stdout.count("artifact:") == 1  # one rank reported


@pytest.mark.slow
def test_a_training_forward_that_bypasses_ddp_is_caught(tmp_path):
    """A ``compute_loss`` override calling ``self.encoder`` instead of ``train_forward`` would
    train each rank on its own gradients; the trainer stops it after the first step."""
    proc = _drive(tmp_path, {**TINY, "epochs": 1}, None, check=False, env=_env(BYPASS_DDP="1"))
    assert proc.returncode != 0
    assert "bypassed" in proc.stderr
    assert not (tmp_path / "result.json").exists()


def test_exit_if_left_group_returns_in_a_process_that_never_joined_one():
    from seqrec.training import distributed

    distributed.exit_if_left_group(3)  # os._exit here would end pytest itself
    assert distributed._left_group is False
