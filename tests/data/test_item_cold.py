"""The item-cold split: a share of the items never trains; their targets are measured apart."""

from __future__ import annotations

import numpy as np
import pytest

from seqrec.data.splits import item_cold_split, leave_last_out
from seqrec.errors import ConfigError
from seqrec.testing.synthetic import markov_sequences


@pytest.fixture(scope="module")
def seqs():
    return markov_sequences(n_users=60, n_items=40, min_len=4, max_len=15, seed=2)


def test_held_out_items_never_train_and_targets_are_leave_last_outs(seqs):
    split = item_cold_split(seqs, share=0.2, seed=7)
    cold = split.cold_items
    assert split.protocol == "item-cold" and len(cold) == 8  # 20% of the 40 items
    for part in (split.train, split.train_valid):
        assert not np.isin(part.items, cold).any()
    base = leave_last_out(seqs)
    for ours, theirs in ((split.valid, base.valid), (split.test, base.test)):
        assert np.array_equal(ours.items, theirs.items)
        assert np.array_equal(ours.cutoffs, theirs.cutoffs)
    # every non-held-out interaction of the leave-last-out training data is still there
    assert len(split.train.items) == int((~np.isin(base.train.items, cold)).sum())
    hot = split.cold_targets(split.test)
    warm = split.cold_targets(split.test, cold=False)
    assert len(hot) + len(warm) == len(split.test) == split.info["users"]
    assert np.isin(hot.items, cold).all() and not np.isin(warm.items, cold).any()
    assert split.info["cold_test_targets"] == len(hot) > 0


def test_the_draw_follows_the_seed(seqs):
    a = item_cold_split(seqs, 0.2, seed=1).cold_items
    assert np.array_equal(a, item_cold_split(seqs, 0.2, seed=1).cold_items)
    assert not np.array_equal(a, item_cold_split(seqs, 0.2, seed=2).cold_items)


def test_bad_shares_are_refused(seqs):
    with pytest.raises(ConfigError, match="cold_share"):
        item_cold_split(seqs, 0.0)
    from seqrec.config import SplitSection

    with pytest.raises(ConfigError, match="cold_share"):
        SplitSection(protocol="item-cold", cold_share=1.5)


def test_an_item_cold_run_reports_cold_and_warm_test_metrics(tmp_path):
    import seqrec
    from seqrec.testing.synthetic import write_log_csv

    write_log_csv(tmp_path / "log.csv", n_users=40, n_items=25, time_unit="s")
    run = seqrec.train(
        tmp_path / "log.csv",
        "pop",
        data_options={"filter": "none", "columns": "user=customer,item=sku,timestamp=event_ms"},
        split_options={"protocol": "item-cold", "cold_share": 0.2},
        progress=False,
    )
    metrics = run.record["metrics"]
    assert set(metrics) == {"valid", "test", "test_cold", "test_warm"}
    n = run.record["n_targets"]
    assert n["test_cold"] + n["test_warm"] == n["test"]
    # popularity never ranks an item it never counted above a counted one
    assert metrics["test_cold"]["HR@10"] == 0.0 < metrics["test_warm"]["HR@10"]
    info = run.record["split_info"]
    assert info["cold_items"] == round(0.2 * 27)  # 25 items and 2 that occur once
    assert info["cold_test_targets"] == n["test_cold"]
