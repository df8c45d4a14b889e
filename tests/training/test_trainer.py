import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import torch

from seqrec.errors import ConfigError
from seqrec.models.neural_config import TrainConfig, settings
from seqrec.models.sasrec import SASRec, SASRecConfig
from seqrec.testing.synthetic import leave_last_out_small, markov_sequences

TINY = dict(max_len=10, dim=16, n_blocks=1, batch_size=8, lr=3e-3, num_threads=1, seed=3)

CHILD = textwrap.dedent(
    """
    import sys, time
    from seqrec.models.neural_config import settings
    from seqrec.models.sasrec import SASRec, SASRecConfig
    from seqrec.testing.synthetic import leave_last_out_small, markov_sequences

    class Slow(SASRec):
        def make_batch(self, train, rows, rng):
            time.sleep(0.05)  # widen the window in which the parent kills us
            return super().make_batch(train, rows, rng)

    train, valid, test = leave_last_out_small(markov_sequences(n_users=48, n_items=20, seed=5))
    cfg = settings(SASRecConfig, **eval(sys.argv[3]))
    Slow(cfg).fit(train, valid, checkpoint_dir=sys.argv[1], checkpoint_every=1, progress=False)
    open(sys.argv[2], "w").write("finished")
    """
)


def _history(model):
    return [
        {k: h[k] for k in ("epoch", "step", "metrics", "train_loss")}
        for h in model.training_log.history
    ]


@pytest.mark.slow
@pytest.mark.parametrize("loss", ["bce"])
def test_resume_after_sigkill_matches_uninterrupted_run(tmp_path, loss):
    """A subprocess trains with a checkpoint every step; it is SIGKILLed mid-run, training
    resumes here from its last checkpoint, and everything matches an uninterrupted run."""
    kwargs = {**TINY, "epochs": 4, "patience": 0, "loss": loss}
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    done = tmp_path / "done"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "run"), str(done), repr(kwargs)], env=env
    )
    try:
        train, valid, test = leave_last_out_small(markov_sequences(n_users=48, n_items=20, seed=5))
        reference = SASRec(settings(SASRecConfig, **kwargs)).fit(train, valid, progress=False)
        deadline = time.time() + 60
        while not (tmp_path / "run" / "last.pt").exists():
            assert proc.poll() is None, "child ended before writing a checkpoint"
            assert time.time() < deadline, "no checkpoint within 60 s"
            time.sleep(0.01)
        time.sleep(0.3)  # let it run a few more steps
        assert proc.poll() is None, "child finished before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert not done.exists()
    resumed = SASRec(settings(SASRecConfig, **kwargs)).fit(
        train, valid, checkpoint_dir=tmp_path / "run", progress=False
    )
    assert resumed.training_log.resumed_from_step  # it really continued a partial run
    assert resumed.training_log.resumed_from_step < resumed.training_log.global_step
    assert _history(resumed) == _history(reference)  # every validation metric identical
    hist = test.histories()
    np.testing.assert_array_equal(resumed.score(hist), reference.score(hist))
    assert not list((tmp_path / "run").glob("*.tmp"))


@pytest.fixture(scope="module")
def data():
    seqs = markov_sequences(n_users=40, n_items=20, seed=2)
    return leave_last_out_small(seqs)


def test_early_stopping_restores_best_and_logs_every_validation(tmp_path, data):
    train, valid, _ = data
    cfg = settings(
        SASRecConfig, **{**TINY, "lr": 5e-2}, epochs=30, patience=2
    )  # big lr: overfits, stops early
    model = SASRec(cfg).fit(train, valid, log_path=tmp_path / "val.jsonl", progress=False)
    lg = model.training_log
    lines = [json.loads(x) for x in (tmp_path / "val.jsonl").read_text().splitlines()]
    assert len(lines) == len(lg.history) == lg.epochs_run
    metrics = [x["metrics"]["NDCG@10"] for x in lines]
    assert lg.best_metric == max(metrics)
    # patience 2: the run stops two validations after its best, well before epoch 30
    assert lg.stopped == "patience"
    assert lg.epochs_run < 30 and metrics.index(max(metrics)) == len(metrics) - 3
    assert lg.best_epoch == lines[-3]["epoch"] and all(m < lg.best_metric for m in metrics[-2:])
    # the restored weights are the best validation weights
    assert model.validation_metrics(valid)["NDCG@10"] == pytest.approx(lg.best_metric)
    assert 0.0 < lg.batch_share < 1.0


def test_time_budget_and_finished_run_resume(tmp_path, data):
    train, valid, _ = data
    cfg = settings(SASRecConfig, **TINY, epochs=1000, patience=0, max_train_seconds=0.5)
    m = SASRec(cfg).fit(train, valid, checkpoint_dir=tmp_path, progress=False)
    assert m.training_log.stopped == "time_budget" and m.training_log.epochs_run < 1000
    again = SASRec(cfg).fit(train, valid, checkpoint_dir=tmp_path, progress=False)
    assert again.training_log.global_step == m.training_log.global_step  # nothing re-trained
    hist = valid.histories()
    np.testing.assert_array_equal(m.score(hist), again.score(hist))


def test_checkpoint_dir_refuses_another_config(tmp_path, data):
    train, valid, _ = data
    SASRec(settings(SASRecConfig, **TINY, epochs=1)).fit(
        train, None, checkpoint_dir=tmp_path, progress=False
    )
    with pytest.raises(ConfigError, match="lr"):
        SASRec(settings(SASRecConfig, **{**TINY, "lr": 1e-2}, epochs=1)).fit(
            train, None, checkpoint_dir=tmp_path, progress=False
        )


def test_more_epochs_or_budget_continue_a_finished_run(tmp_path, data):
    train, valid, _ = data
    one = SASRec(settings(SASRecConfig, **TINY, epochs=1, patience=0)).fit(
        train, valid, checkpoint_dir=tmp_path, progress=False
    )
    two = SASRec(settings(SASRecConfig, **TINY, epochs=2, patience=0)).fit(
        train, valid, checkpoint_dir=tmp_path, progress=False
    )
    straight = SASRec(settings(SASRecConfig, **TINY, epochs=2, patience=0)).fit(
        train, valid, progress=False
    )
    assert two.training_log.global_step == 2 * one.training_log.global_step
    # continuing after epoch 1 is exact: identical to running 2 epochs straight
    assert _history(two) == _history(straight)


def test_training_without_validation_runs_all_epochs(data):
    train, _, _ = data
    m = SASRec(settings(SASRecConfig, **TINY, epochs=2)).fit(train, progress=False)
    assert m.training_log.epochs_run == 2 and m.training_log.history == []


def test_tensorboard_is_optional(tmp_path, data, caplog):
    train, _, _ = data
    try:
        import tensorboard  # noqa: F401

        has_tb = True
    except ImportError:
        has_tb = False
    m = SASRec(settings(SASRecConfig, **TINY, epochs=1)).fit(
        train, tensorboard_dir=tmp_path / "tb", progress=False
    )
    assert m.training_log.epochs_run == 1
    if not has_tb:
        assert "tensorboard is not installed" in caplog.text


@pytest.mark.parametrize("loss", ["bce", "ce"])
def test_sliding_windows_train_on_more_rows_and_sample_negatives_per_user(data, loss):
    train, valid, _ = data
    short = dict(TINY, max_len=4, epochs=1, patience=0, loss=loss)
    last = SASRec(settings(SASRecConfig, **short, train_windows="last")).fit(
        train, valid, progress=False
    )
    sliding = SASRec(settings(SASRecConfig, **short, train_windows="sliding")).fit(
        train, valid, progress=False
    )
    n_windows = int(sum(max(1, -(-(n - 1) // 4)) for n in train.lengths if n >= 2))
    assert sliding.training_log.global_step == -(-n_windows // TINY["batch_size"])
    assert sliding.training_log.global_step > last.training_log.global_step
    with pytest.raises(ConfigError):
        settings(SASRecConfig, train_windows="random")


def test_window_stride_trains_each_transition_once_with_more_windows(data):
    """Overlapping windows: more rows per epoch, the same number of targets as 'sliding'."""
    train, _, _ = data
    short = dict(TINY, max_len=4, epochs=1, patience=0)
    plain = SASRec(settings(SASRecConfig, **short, train_windows="sliding"))
    overlap = SASRec(settings(SASRecConfig, **short, train_windows="sliding", window_stride=1))
    targets = {}
    for name, m in (("plain", plain), ("overlap", overlap)):
        windows, m._row_source, rows = m.training_rows(train)
        batch = m.make_batch(windows, rows, np.random.default_rng(0))["batch"]
        targets[name] = (len(rows), int((batch.targets > 0).sum()))
    assert targets["overlap"][0] > targets["plain"][0]
    assert targets["overlap"][1] == targets["plain"][1] == int((train.lengths - 1).clip(0).sum())
    overlap.fit(train, progress=False)
    assert overlap.training_log.epochs_run == 1
    with pytest.raises(ConfigError, match="window_stride"):
        settings(
            SASRecConfig, **short, train_windows="last", window_stride=2
        )  # needs sliding windows
    with pytest.raises(ConfigError, match="window_stride"):
        settings(SASRecConfig, **short, train_windows="sliding", window_stride=5)


def test_batch_targets_sizes_the_batch_by_targets_per_row(data):
    """batch_targets picks the batch in sequences from the rows' mean target count, so long
    and short rows get batches of about the same number of targets."""
    from seqrec.training.rows import resolved_batch, targets_per_row

    train, _, _ = data
    for max_len in (3, 8):
        cfg = settings(
            SASRecConfig,
            **dict(TINY, max_len=max_len, epochs=1, patience=0, batch_size=0),
            batch_targets=40,
        )
        model = SASRec(cfg)
        windows, _, rows = model.training_rows(train)
        mean = targets_per_row(windows, rows, cfg, cfg.max_len).mean()
        assert resolved_batch(cfg, windows, rows, cfg.max_len).batch_size == max(
            1, round(40 / mean)
        )
        model.fit(train, progress=False)
        assert model.train_batch_size == max(1, round(40 / mean))
        assert model.training_log.global_step == -(-len(rows) // model.train_batch_size)
    # a given batch_size wins; SASRec's default (0) sizes by batch_targets
    assert (
        resolved_batch(TrainConfig(batch_size=8, batch_targets=40), windows, rows, 8).batch_size
        == TINY["batch_size"]
    )
    sasrec_train = TrainConfig.for_model(SASRecConfig)
    assert sasrec_train.batch_size == 0 and sasrec_train.batch_targets == 1024
    with pytest.raises(ConfigError, match="batch_targets"):
        settings(SASRecConfig, **TINY, batch_targets=-1)
    with pytest.raises(ConfigError, match="batch_targets"):
        settings(SASRecConfig, **dict(TINY, batch_size=0), batch_targets=0)
    from seqrec.models.bert4rec import BERT4RecConfig
    from seqrec.models.bsarec import BSARecConfig
    from seqrec.models.fmlprec import FMLPRecConfig
    from seqrec.models.tvrec import TVRecConfig

    for config_cls in (BERT4RecConfig, FMLPRecConfig, BSARecConfig, TVRecConfig):  # not next items
        with pytest.raises(ConfigError, match="batch_targets"):
            settings(config_cls, batch_size=0)


def test_min_epoch_steps_raises_an_automatic_batch_where_the_data_allow(data):
    """With batch_size = 0, min_epoch_steps grows the batch beyond batch_targets' size, up to
    auto_batch_max, while an epoch keeps that many steps; small data keep the targets batch, and
    a given batch_size is never changed."""
    from seqrec.training.rows import resolved_batch, targets_per_row

    train, _, _ = data
    cfg = settings(
        SASRecConfig,
        **dict(TINY, batch_size=0, epochs=1, patience=0),
        batch_targets=9,
        min_epoch_steps=3,
        auto_batch_max=64,
    )
    model = SASRec(cfg)
    windows, _, rows = model.training_rows(train)
    by_targets = max(1, round(9 / targets_per_row(windows, rows, cfg, cfg.max_len).mean()))
    by_steps = len(rows) // 3
    assert by_steps > by_targets  # the case under test: the data allow a larger batch
    assert resolved_batch(cfg, windows, rows, cfg.max_len).batch_size == min(64, by_steps)
    capped = settings(
        SASRecConfig,
        **dict(TINY, batch_size=0),
        batch_targets=9,
        min_epoch_steps=3,
        auto_batch_max=by_targets + 1,
    )
    assert resolved_batch(capped, windows, rows, capped.max_len).batch_size == by_targets + 1
    few_rows = settings(
        SASRecConfig, **dict(TINY, batch_size=0), batch_targets=9, min_epoch_steps=len(rows)
    )
    assert (
        resolved_batch(few_rows, windows, rows, few_rows.max_len).batch_size == by_targets
    )  # one-row batches never win
    off = settings(SASRecConfig, **dict(TINY, batch_size=0), batch_targets=9, min_epoch_steps=0)
    assert resolved_batch(off, windows, rows, off.max_len).batch_size == by_targets
    given = settings(SASRecConfig, **TINY, min_epoch_steps=3)
    assert resolved_batch(given, windows, rows, given.max_len).batch_size == TINY["batch_size"]
    model.fit(train, progress=False)
    assert model.train_batch_size == min(64, by_steps)
    steps = model.training_log.global_step
    assert steps == -(-len(rows) // model.train_batch_size) and steps >= 3
    sasrec_train = TrainConfig.for_model(SASRecConfig)
    assert sasrec_train.min_epoch_steps == 100 and sasrec_train.auto_batch_max == 128
    with pytest.raises(ConfigError, match="min_epoch_steps"):
        settings(SASRecConfig, min_epoch_steps=-1)


def test_epoch_records_reach_the_callback_and_survive_resume(tmp_path, data):
    """One record per epoch goes to ``on_epoch`` (loss, validation metric, seconds); a run
    continued from its checkpoint keeps the earlier epochs' records."""
    train, valid, _ = data
    seen = []
    cfg = settings(SASRecConfig, **{**TINY, "epochs": 2, "patience": 0})
    model = SASRec(cfg).fit(
        train, valid, checkpoint_dir=tmp_path / "ck", progress=False, on_epoch=seen.append
    )
    assert [r["epoch"] for r in seen] == [1, 2] and all(r["epochs"] == 2 for r in seen)
    assert all(np.isfinite(r["train_loss"]) and r["metric"] == "NDCG@10" for r in seen)
    assert seen[-1]["seconds"] >= seen[0]["seconds"] > 0
    assert model.training_log.epoch_log == seen
    more = []
    longer = SASRec(settings(SASRecConfig, **{**TINY, "epochs": 3, "patience": 0}))
    longer.fit(train, valid, checkpoint_dir=tmp_path / "ck", progress=False, on_epoch=more.append)
    assert [r["epoch"] for r in more] == [3]  # resumed: only the new epoch is run
    assert [r["epoch"] for r in longer.training_log.epoch_log] == [1, 2, 3]
    assert longer.training_log.epoch_log[:2] == seen


def test_refit_trains_for_the_epochs_validation_selected(data):
    """The temporal protocol's refit on train + validation has no validation targets left: a
    model that stopped early refits for its best epoch, not for its configured maximum."""
    from seqrec.experiment import refit_model
    from seqrec.models.factorization.pop import Pop, PopConfig

    train, valid, _ = data
    cfg = settings(
        SASRecConfig, **{**TINY, "lr": 5e-2}, epochs=40, patience=2
    )  # big lr: stops early
    model = SASRec(cfg).fit(train, valid, progress=False)
    best = model.training_log.best_epoch
    assert best < model.training_log.epochs_run <= 40  # it did stop early, past its best
    again = refit_model(model)
    assert isinstance(again, SASRec) and again.train_config.epochs == best
    assert again.config.dim == cfg.dim and again.train_config.patience == cfg.patience
    again.fit(train, None, progress=False)
    assert again.training_log.epochs_run == best
    closed_form = refit_model(Pop(PopConfig()).fit(train))
    assert isinstance(closed_form, Pop) and closed_form.config == PopConfig()


def test_bf16_precision_trains_in_bfloat16_and_keeps_float32_weights(data):
    train, valid, _ = data
    with pytest.raises(ConfigError, match="precision"):
        settings(SASRecConfig, precision="fp16")
    runs = {
        p: SASRec(
            settings(SASRecConfig, **TINY, epochs=8, patience=0, dropout=0.0, precision=p)
        ).fit(train, valid, progress=False)
        for p in ("fp32", "bf16")
    }
    assert all(p.dtype == torch.float32 for p in runs["bf16"].encoder.parameters())
    losses = {p: [h["train_loss"] for h in m.training_log.history] for p, m in runs.items()}
    assert losses["bf16"][-1] < losses["bf16"][0]  # it learns
    assert losses["bf16"] != losses["fp32"]  # the arithmetic really changed ...
    for a, b in zip(losses["bf16"], losses["fp32"], strict=True):  # ... and stayed close
        assert a == pytest.approx(b, rel=0.05)
    best = {p: m.training_log.best_metric for p, m in runs.items()}
    assert best["bf16"] == pytest.approx(best["fp32"], abs=0.1)


def test_fused_adamw_where_every_parameter_is_a_real_float_tensor():
    from seqrec.training.trainer import fused_adamw

    assert fused_adamw(torch.nn.Linear(3, 2)) is True
    complex_module = torch.nn.Module()
    complex_module.lam = torch.nn.Parameter(torch.zeros(2, dtype=torch.complex64))
    assert fused_adamw(complex_module) is None  # torch's choice
    assert fused_adamw(torch.nn.Module()) is None


def test_a_checkpoint_of_the_plain_adamw_resumes_under_the_fused_one(tmp_path, data, monkeypatch):
    """Runs checkpointed before the trainer chose the fused AdamW continue (with their saved
    optimizer options) and reach the same step count as a run of the new code."""
    import seqrec.training.trainer as trainer

    train, valid, _ = data
    with monkeypatch.context() as m:
        m.setattr(trainer, "fused_adamw", lambda model: None)
        one = SASRec(settings(SASRecConfig, **TINY, epochs=1, patience=0)).fit(
            train, valid, checkpoint_dir=tmp_path, progress=False
        )
    two = SASRec(settings(SASRecConfig, **TINY, epochs=2, patience=0)).fit(
        train, valid, checkpoint_dir=tmp_path, progress=False
    )
    assert two.training_log.global_step == 2 * one.training_log.global_step
    assert np.isfinite(two.score(valid.histories())[:, 1:]).all()
