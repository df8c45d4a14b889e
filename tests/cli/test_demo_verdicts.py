"""``seqrec demo`` says why a neural model does not beat the best baseline."""

import pytest

from seqrec.cli.demo import demo_verdicts


def _rec(model, ndcg, epochs=None, stopped=None):
    return {
        "model": model,
        "metrics": {"test": {"NDCG@10": ndcg}},
        "epochs": epochs,
        "stopped": stopped,
    }


def test_a_losing_model_gets_a_reason_and_a_remedy():
    lines = demo_verdicts(
        [
            _rec("pop", 0.02),
            _rec("puresvd", 0.03),
            _rec("sasrec", 0.025, 12, "time_budget"),
            _rec("lrurec", 0.04, 30, "patience"),
        ]
    )
    notes = [line for line in lines if line.startswith("note:")]
    assert len(notes) == 1
    assert "sasrec" in notes[0] and "puresvd" in notes[0] and "time budget" in notes[0]
    # only --max-seconds sets a time budget in the demo: the remedy is to drop it
    assert "without --max-seconds" in notes[0]
    assert not any("lrurec" in line for line in lines)


@pytest.mark.parametrize(
    "stopped, remedy",
    [("patience", "--set train.patience=60"), ("epochs", "--set train.epochs=400")],
)
def test_the_remedy_follows_what_stopped_the_model(stopped, remedy):
    lines = demo_verdicts([_rec("puresvd", 0.03), _rec("hstu", 0.02, 40, stopped)])
    notes = [line for line in lines if line.startswith("note:")]
    assert len(notes) == 1
    assert remedy in notes[0] and "seqrec train -m hstu " in notes[0] and "40 epoch(s)" in notes[0]
    assert "max-seconds" not in notes[0]
    # on the user's data the command names it, with the demo's --set
    (note,) = [
        ln
        for ln in demo_verdicts(
            [_rec("puresvd", 0.03), _rec("hstu", 0.02, 40, stopped)],
            data_args="shop.csv --set data.sep=;",
        )
        if ln.startswith("note:")
    ]
    assert "seqrec train shop.csv --set data.sep=; -m hstu " in note


def test_all_winning_says_so():
    lines = demo_verdicts(
        [_rec("pop", 0.02), _rec("puresvd", 0.03), _rec("hstu", 0.05, 10, "epochs")]
    )
    assert any("every neural model beats" in line for line in lines)
    assert not any(line.startswith("note:") for line in lines)


def test_without_baselines_nothing_is_claimed():
    assert demo_verdicts([_rec("sasrec", 0.05, 3, "epochs")]) == []
