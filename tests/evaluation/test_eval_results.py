import json
import subprocess
import sys

import numpy as np
import pytest

from seqrec.data.sequences import Sequences, Targets
from seqrec.errors import ConfigError
from seqrec.evaluation import base_record, evaluate, markdown_table, result_record, write_result

from .fakes import FixedScores


def _results():
    seqs = Sequences.from_lists([[1, 2, 3, 4], [2, 3, 4, 5]], n_items=6, users=np.arange(2))
    valid = Targets(seqs, np.array([0, 1]), np.array([2, 2]), np.array([3, 4]))
    test = Targets(seqs, np.array([0, 1]), np.array([3, 3]), np.array([4, 5]))
    scores = np.arange(7, dtype=np.float32)[None, :].repeat(2, 0)
    out = {}
    for name, tg in (("valid", valid), ("test", test)):
        out[name] = evaluate(FixedScores(tg, scores).fit(seqs), tg, ks=(1, 5))
    return out


def test_base_record_fields():
    rec = base_record(model="x")
    assert rec["model"] == "x"
    assert rec["hardware"]["cpu_count"] >= 1 and rec["hardware"]["platform"]
    assert rec["versions"]["numpy"] == np.__version__
    assert rec["versions"]["python"].count(".") == 2
    assert "T" in rec["created"] and rec["created"].endswith("+00:00")
    assert isinstance(rec["command"], str)


def test_versions_do_not_import_torch():
    code = (
        "import sys; from seqrec.evaluation.results import base_record; r = base_record(); "
        "assert 'torch' not in sys.modules; assert r['versions']['torch']; print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr


def test_result_record_schema_and_files(tmp_path):
    res = _results()
    rec = result_record(
        "fake",
        "v1",
        "synthetic",
        "f00d",
        "leave-last-out",
        res,
        seed=7,
        config={"a": 1},
        epochs=3,
        train_seconds=1.5,
        note="x",
    )
    for key in (
        "model",
        "variant",
        "dataset",
        "dataset_fingerprint",
        "protocol",
        "ranking",
        "seen_filter",
        "metrics",
        "ci95",
        "seed",
        "config",
        "epochs",
        "train_seconds",
        "eval_seconds",
        "hardware",
        "versions",
        "command",
    ):
        assert key in rec, key
    assert rec["ranking"] == "full" and rec["seen_filter"] == "history" and rec["note"] == "x"
    assert rec["metrics"]["test"]["HR@1"] == res["test"].metrics["HR@1"]
    assert rec["ci95"]["valid"]["MRR"] == list(res["valid"].ci95["MRR"])
    json_path, md_path = write_result(rec, tmp_path, stem="run")
    loaded = json.loads(json_path.read_text())
    assert loaded["metrics"] == rec["metrics"] and loaded["seed"] == 7
    md = md_path.read_text()
    assert "(valid)" in md and "(test)" in md and "synthetic" in md and "full" in md
    assert "seen filter: history" in md and "seed: 7" in md


def test_markdown_table_side_by_side():
    res = _results()
    a = result_record("pop", None, "d", "f", "leave-last-out", res, seed=0)
    b = result_record("svd", "N", "d", "f", "leave-last-out", res, seed=0)
    table = markdown_table([a, b], metrics=("HR@5", "NDCG@5"))
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    assert len(rows) == 3  # header + two models
    assert rows[1].startswith("| pop |") and rows[2].startswith("| svd | N |")
    assert f"{res['test'].metrics['HR@5']:.4f}" in rows[1]
    with pytest.raises(ConfigError):
        markdown_table([])


def test_mixed_protocol_splits_rejected():
    res = _results()
    res["valid"].seen_filter = "none"
    with pytest.raises(ConfigError, match="seen_filter"):
        result_record("pop", None, "d", "f", "p", res, seed=0)


def test_write_result_saves_candidates_beside(tmp_path):
    from seqrec.evaluation import draw_candidates, load_candidates

    seqs = Sequences.from_lists([[1, 2, 3]] * 3, n_items=9, users=np.arange(3))
    tg = Targets(seqs, np.arange(3), np.full(3, 2), np.full(3, 3))
    cands = draw_candidates(tg, 4, seed=1)
    rec = {"model": "m", "metrics": {"test": {"HR@1": 0.5}}, "ranking": cands.label}
    json_path, _ = write_result(rec, tmp_path, stem="s", candidates=cands)
    saved = json.loads(json_path.read_text())["candidates_file"]
    assert np.array_equal(load_candidates(tmp_path / saved).negatives, cands.negatives)
