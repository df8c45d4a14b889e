"""``seqrec runs``: the trained runs under a folder in one table, grouped by data and protocol,
best validation first, unfinished runs named with their resume command."""

import json

from seqrec.cli.main import main


def _train(csv, out, *extra):
    return main(["train", str(csv), "--set", "data.filter=none", "--out", str(out), *extra])


def test_runs_table_groups_by_data_and_ranks_by_validation(tmp_path, capsys):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text(
        "user,item,timestamp\n"
        + "".join(f"{u},{(u * 3 + k) % 9},{k}\n" for u in range(15) for k in range(6))
    )
    b.write_text(a.read_text() + "".join(f"{u},{k},{10 + k}\n" for u in range(3) for k in range(3)))
    runs = tmp_path / "runs"
    assert _train(a, runs / "a-pop", "-m", "pop") == 0
    assert _train(a, runs / "a-svd", "-m", "puresvd", "--set", "model.rank=3") == 0
    assert _train(b, runs / "b-pop", "-m", "pop") == 0
    (runs / "broken").mkdir()
    (runs / "broken" / "result.json").write_text("{not json")
    (runs / "stopped" / "checkpoint").mkdir(parents=True)
    (runs / "stopped" / "checkpoint" / "last.pt").write_bytes(b"x")
    (runs / "stopped" / "experiment.json").write_text(json.dumps({"command": "seqrec train X"}))
    capsys.readouterr()

    assert main(["runs", str(runs)]) == 0
    out = capsys.readouterr().out
    blocks = out.split("\n\n")
    a_block = next(b for b in blocks if b.startswith(f"{a} |"))
    assert "b-pop" not in a_block and f"{b} |" in out  # another dataset: another table
    results = {
        name: json.loads((runs / name / "result.json").read_text()) for name in ("a-pop", "a-svd")
    }
    order = sorted(results, key=lambda n: -results[n]["metrics"]["valid"]["NDCG@10"])
    lines = [ln for ln in a_block.splitlines() if "a-pop" in ln or "a-svd" in ln]
    assert [ln.split()[0].rsplit("/", 1)[-1] for ln in lines] == order  # best validation first
    assert f"{results[order[0]]['metrics']['test']['NDCG@10']:.4f}" in lines[0]
    assert "broken/result.json is not a readable result file" in out
    assert "unfinished:" in out and "to resume, rerun: seqrec train X" in out

    assert main(["runs", str(runs), "--metric", "hr@20"]) == 0  # any case
    assert "valid HR@20" in capsys.readouterr().out
    assert main(["runs", str(runs), "--metric", "NDGC@10"]) == 2
    assert "did you mean 'NDCG@10'" in capsys.readouterr().err
    assert main(["runs", str(tmp_path / "none")]) == 2


def test_runs_without_a_runs_folder_shows_the_runs_in_the_current_folder(
    tmp_path, capsys, monkeypatch
):
    """`seqrec train shop.csv --out r1` puts runs next to the data: `seqrec runs` finds them."""
    log = tmp_path / "shop.csv"
    log.write_text(
        "user,item,timestamp\n"
        + "".join(f"{u},{(u * 3 + k) % 9},{k}\n" for u in range(15) for k in range(6))
    )
    monkeypatch.chdir(tmp_path)
    assert main(["runs"]) == 2  # nothing anywhere: the error says where runs go
    assert "seqrec train writes runs under ./runs" in capsys.readouterr().err
    assert _train(log, tmp_path / "r1", "-m", "pop") == 0
    capsys.readouterr()
    assert main(["runs"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("note: no ./runs folder here") and "\nr1 " in out


def test_a_resumed_run_counts_the_time_of_every_segment(tmp_path):
    """`seqrec runs` showed a resumed run's last segment only (32 s against 171 s in its log)."""
    log = tmp_path / "shop.csv"
    log.write_text(
        "user,item,timestamp\n"
        + "".join(f"{u},{(u * 3 + k) % 9},{k}\n" for u in range(60) for k in range(10))
    )
    out = tmp_path / "run"
    common = [
        "-m",
        "sasrec",
        "--set",
        "model.dim=16",
        "--set",
        "model.max_len=10",
        "--set",
        "train.patience=0",
    ]
    assert _train(log, out, *common, "--set", "train.epochs=6") == 0
    assert _train(log, out, *common, "--set", "train.epochs=7") == 0  # resumes for one more epoch
    lines = [json.loads(ln) for ln in (out / "train-log.jsonl").read_text().splitlines()]
    record = json.loads((out / "result.json").read_text())
    # the logged seconds count only steps and validations, of both segments: the run took longer
    assert record["epochs"] == 7 and record["train_seconds"] >= lines[-1]["seconds"], (
        record,
        lines[-1],
    )
