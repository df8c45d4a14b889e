"""Must-show 4, the newcomer path: a CSV with custom column names and millisecond timestamps
-> train from the CLI -> interrupt (Ctrl-C) -> rerun, which resumes -> recommend for a user
-> batch recommend to a file."""

import json

import polars as pl
import pytest

from seqrec.cli.main import main
from seqrec.errors import ConfigError
from seqrec.models.base import Recommender
from seqrec.testing.synthetic import write_log_csv


def test_csv_with_custom_columns_and_ms_timestamps_to_batch_file(tmp_path, capsys, monkeypatch):
    csv = tmp_path / "my-shop.csv"
    info = write_log_csv(
        csv, n_users=40, n_items=25, columns=("customer", "sku", "event_ms"), time_unit="ms"
    )
    (tmp_path / "products.csv").write_text(
        "sku,name,tags\n"
        + "".join(f"{i},Product {i},cat{n % 3}\n" for n, i in enumerate(info["items"]))
    )
    train = [
        "train",
        "--set",
        f"data.name={csv}",
        "--set",
        "data.columns=user=customer,item=sku,timestamp=event_ms",
        "--set",
        f"data.item_file={tmp_path / 'products.csv'}",
        "--set",
        "model.name=sasrec",
        "--set",
        "model.dim=16",
        "--set",
        "model.max_len=20",
        "--set",
        "train.epochs=3",
        "--set",
        "train.num_threads=1",
        "--out",
        str(tmp_path / "run"),
    ]

    # 1. the wrong unit: refused, with the key to set (left out, the unit follows from the size)
    assert main(train[:3] + ["--set", "data.time_unit=s"] + train[3:]) == 2
    err = capsys.readouterr().err
    assert "milliseconds" in err and "data.time_unit=ms" in err
    assert not (tmp_path / "run" / "model").exists()

    # 2. train with the unit, in the same run directory (the refused attempt trained nothing),
    # 3. interrupted by Ctrl-C in its second epoch, then the same command again: it resumes
    # from the checkpoint of epoch 1
    from seqrec.cli import runs

    run = tmp_path / "run"
    train_ms = train[:3] + ["--set", "data.time_unit=ms"] + train[3:]

    real_call = runs.EpochPrinter.__call__

    def ctrl_c_in_epoch_2(self, rec):
        real_call(self, rec)
        if rec["epoch"] == 2:  # before epoch 2's checkpoint: the rerun repeats epoch 2
            raise KeyboardInterrupt

    monkeypatch.setattr(runs.EpochPrinter, "__call__", ctrl_c_in_epoch_2)
    assert main(train_ms) == 130
    err = capsys.readouterr().err
    assert "rerun the same command to resume" in err
    assert (run / "checkpoint" / "last.pt").exists() and not (run / "model").exists()
    monkeypatch.setattr(runs.EpochPrinter, "__call__", real_call)
    assert main(train_ms) == 0
    captured = capsys.readouterr()
    assert "resuming the run" in captured.err and "epoch 1/3" not in captured.err
    assert "epoch 3/3" in captured.err and "artifact:" in captured.out
    epochs = [
        json.loads(line)["epoch"] for line in (run / "train-log.jsonl").read_text().splitlines()
    ]
    assert epochs == [1, 2, 3]
    artifact = run / "model"

    # 4. recommend for a known user, from their stored history, with titles
    assert main(["recommend", str(artifact), "--user", "c7", "-k", "5"]) == 0
    out = capsys.readouterr().out
    model = Recommender.load(artifact)
    history = model.user_histories.raw_histories(["c7"], model.vocab)[0]
    (expected,) = model.recommend([history], k=5)
    assert len(expected.items) == 5 and not set(expected.items) & set(history)
    for item in expected.items:
        assert f"Product {item}" in out
    rows = [ln for ln in out.splitlines() if ln[:1].isdigit()]
    assert [ln.split()[1] for ln in rows] == list(expected.items)

    # 5. batch recommend to a file: stored users, with a deny list
    (tmp_path / "who.csv").write_text("user\n" + "\n".join(info["users"][:10]) + "\n")
    top = tmp_path / "top.csv"
    assert (
        main(
            [
                "recommend",
                str(artifact),
                "--input",
                str(tmp_path / "who.csv"),
                "--output",
                str(top),
                "-k",
                "3",
                "--deny",
                "sku1,sku2",
            ]
        )
        == 0
    )
    table = pl.read_csv(top)
    assert table.columns == ["user", "rank", "item", "score", "title", "categories", "fallback"]
    assert table.height == 30 and table["user"].n_unique() == 10
    assert not set(table["item"].to_list()) & {"sku1", "sku2"}
    c7 = model.recommend([history], k=3, deny=["sku1", "sku2"])[0].items
    assert "c7" in info["users"][:10]
    assert table.filter(pl.col("user") == "c7").sort("rank")["item"].to_list() == list(c7)
    assert table["title"].str.starts_with("Product ").all()


def test_misspelt_model_names_and_keys_suggest_the_closest_known_one(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # runs/ of the working directory is where a run would go
    cases = [
        (["--set", "model.name=sasrc"], "unknown model 'sasrc' (did you mean 'sasrec'?)"),
        (["--set", "model.name=bert"], "(did you mean 'bert4rec'?)"),
        (
            ["--set", "model.name=sasrec", "--set", "train.lrr=0.1"],
            "lrr in model 'sasrec' (did you mean 'lr'?)",
        ),
        (["--set", "model.nme=sasrec"], "(did you mean 'name'?)"),
        (["--set", "data.name=ml1m"], "unknown dataset 'ml1m' (did you mean 'ml-1m'?)"),
    ]
    for overrides, expected in cases:
        assert main(["train", *overrides]) == 2
        assert expected in capsys.readouterr().err
    assert main(["train", "--set", "model.name=zzzzzz"]) == 2
    assert "did you mean" not in capsys.readouterr().err
    # a data name that is not found fails before the run directory is made
    missing = tmp_path / "no-such-log.csv"
    assert main(["train", "--set", f"data.name={missing}", "--out", "mine"]) == 2
    assert not (tmp_path / "runs").exists() and not (tmp_path / "mine").exists()


def test_evaluate_reads_the_run_data_and_split_and_flags_another_split(tmp_path, capsys):
    csv = tmp_path / "shop.csv"
    write_log_csv(csv, n_users=40, n_items=25, columns=("user", "item", "timestamp"), time_unit="s")
    run = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "--set",
                f"data.name={csv}",
                "--set",
                "data.filter=none",
                "--set",
                "model.name=puresvd",
                "--set",
                "model.rank=4",
                "--out",
                str(run),
            ]
        )
        == 0
    )
    capsys.readouterr()
    # no config: the run's own data file and split, not the default dataset
    assert main(["evaluate", str(run / "model")]) == 0
    out = capsys.readouterr()
    assert "(the data and split it was trained on)" in out.out and "note:" not in out.err
    assert "chunk/s" not in out.err  # no progress bar written into a log (stderr is no terminal)
    # the table shows the cut-offs asked for (it showed empty @10 / @20 columns for ks = 5)
    assert main(["evaluate", str(run / "model"), "--set", "eval.ks=5,15"]) == 0
    header = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("split"))
    assert header.split() == ["split", "HR@5", "NDCG@5", "HR@15", "NDCG@15", "MRR", "COV@5"]
    # another split of the same data: evaluated, but named as not held out
    assert (
        main(
            [
                "evaluate",
                str(run / "model"),
                "--set",
                "split.protocol=temporal",
                "--set",
                "split.valid=5",
                "--set",
                "split.test=5",
            ]
        )
        == 0
    )
    out = capsys.readouterr()
    assert "(NOT the training split)" in out.out
    assert "not the data and split the model was trained on" in out.err


def test_a_closed_pipe_on_stdout_ends_quietly():
    """`seqrec recommend ... | head` closes stdout early: no traceback, the shell's SIGPIPE code."""
    import subprocess
    import sys

    code = (
        "import seqrec.cli.commands as c\n"
        "def dispatch(args):\n    raise BrokenPipeError(32, 'Broken pipe')\n"
        "c.dispatch = dispatch\n"
        "from seqrec.cli.main import main\nraise SystemExit(main(['models']))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 141 and proc.stderr == ""


def test_data_describe_reads_an_own_file_with_the_train_keys(tmp_path, capsys):
    csv = tmp_path / "shop.csv"
    write_log_csv(csv, n_users=12, n_items=10, columns=("customer", "sku", "ts"), time_unit="ms")
    assert main(["data", "describe", str(csv), "--set", "data.time_unit=s"]) == 2  # a wrong unit
    assert "looks like Unix millisecon" in capsys.readouterr().err
    assert main(["data", "describe", str(csv)]) == 0  # columns guessed, the unit from the size
    out = capsys.readouterr().out
    assert "columns         user=customer, item=sku, timestamp=ts; times in milliseconds" in out
    assert (
        main(
            [
                "data",
                "describe",
                str(csv),
                "--set",
                "data.columns=user=customer,item=sku,timestamp=ts",
                "--set",
                "data.time_unit=ms",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "users" in out and " 12\n" in out
    assert main(["data", "describe", str(csv), "--set", "model.name=sasrec"]) == 2
    assert "only data.* keys" in capsys.readouterr().err


def test_settings_typed_without_their_section_or_as_options_are_understood_or_explained(
    tmp_path, capsys
):
    from seqrec.config import load_experiment

    exp = load_experiment(
        None, ["model.name=sasrec", "epochs=3", "filter=none", "ks=5,10", "seed=2"]
    )
    assert exp.model_params["epochs"] == 3 and exp.data.filter == "none" and exp.eval.ks == (5, 10)
    assert exp.seed == 2
    with pytest.raises(ConfigError, match=r"trian \(did you mean 'train'\?\)"):
        load_experiment(None, ["trian.epochs=3"])
    cfg = tmp_path / "flat.toml"
    cfg.write_text("epochs = 3\n")
    with pytest.raises(ConfigError, match=r"epochs = \.\.\. goes in a section: \[train\] epochs"):
        load_experiment(cfg)
    for argv, hint in (
        (["train", "x.csv", "-m", "pop", "--epochs", "3"], "--set train.epochs=3"),
        (["train", "x.csv", "--filter=none"], "--set data.filter=none"),
        (["train", "x.csv", "sasrec"], "a model name goes with -m: -m sasrec"),
        (["evaluate", "runs/x", "--data", "other.csv"], "--set data.name=other.csv"),
        (["train", "x.csv", "--split", "global-time"], "--set split.protocol=global-time"),
    ):
        with pytest.raises(SystemExit):
            main(argv)
        assert hint in capsys.readouterr().err


def test_model_names_as_the_papers_write_them(capsys):
    """-m SASRec / FMLP-Rec / GA_SATF: the registered model, in the shortcut and in a config."""
    from seqrec.config import load_experiment
    from seqrec.registry import canonical_model_name

    assert [
        canonical_model_name(n) for n in ("SASRec", "FMLP-Rec", "GA_SATF", "LRURec", "sasrec")
    ] == ["sasrec", "fmlprec", "ga-satf", "lrurec", "sasrec"]
    assert canonical_model_name("SASRecc") == "SASRecc"  # unknown: left for the error to name
    assert load_experiment(None, ["model.name=BERT4Rec"]).model == "bert4rec"
    assert main(["train", "SASRec"]) == 2
    assert (
        "'SASRec' is a model, not a dataset: pass it as --model sasrec" in capsys.readouterr().err
    )


def test_data_describe_shows_what_was_guessed_of_a_file_layout(tmp_path, capsys):
    (tmp_path / "eu.csv").write_text("user;item;timestamp\n1;2;10\n1;3;11\n2;3;12\n")
    (tmp_path / "nohead.tsv").write_text("1\t2\t1700000000\n1\t3\t1700000001\n")
    parts = tmp_path / "parts"
    parts.mkdir()
    for i in range(2):
        (parts / f"part-{i}.csv").write_text(f"user,item,timestamp\n{i},5,1\n{i},6,2\n")
    for path, line in (
        ("eu.csv", "user=user, item=item, timestamp=timestamp; semicolon-separated"),
        ("nohead.tsv", "timestamp=timestamp; no header line, columns taken as user,item,timestamp"),
        ("parts", "timestamp=timestamp; read 2 part files of parts/"),
    ):
        assert main(["data", "describe", str(tmp_path / path)]) == 0
        assert line in capsys.readouterr().out, path


def test_describe_and_train_say_when_lists_were_exploded(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "seq.csv").write_text('user_id,sequence_item_ids\n1,"5,6,7"\n2,"6,8"\n')
    said = "one row per user with lists (sequence_item_ids): 2 rows exploded into 5 interactions"
    assert main(["data", "describe", "seq.csv"]) == 0
    assert f"read            {said}" in capsys.readouterr().out
    assert main(["train", "seq.csv", "-m", "pop", "--set", "data.filter=none"]) == 0
    assert f"  {said}" in capsys.readouterr().err


def test_train_says_how_your_file_was_read_before_training(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_log_csv(
        tmp_path / "shop.csv",
        n_users=30,
        n_items=20,
        columns=("customer", "sku", "ts"),
        time_unit="ms",
    )
    assert (
        main(["train", str(tmp_path / "shop.csv"), "-m", "pop", "--set", "data.filter=none"]) == 0
    )
    err = capsys.readouterr().err
    assert "data: read shop.csv (user=customer, item=sku, timestamp=ts)" in err
    assert "  timestamps read as milliseconds (their size: past the year 5000 as seconds)" in err
    assert "  preprocessing kept 30 of 30 users, " in err and " interactions" in err
    assert (
        main(["train", "-m", "pop", "--out", str(tmp_path / "named")]) == 0
    )  # a named dataset: quiet
    assert "data: read" not in capsys.readouterr().err


def test_two_models_for_train_point_to_the_demo(capsys):
    for argv in (
        ["train", "shop.csv", "-m", "sasrec", "-m", "lrurec"],
        ["train", "shop.csv", "-m", "sasrec,lrurec"],
    ):
        assert main(argv) == 2
        assert "seqrec demo shop.csv --models sasrec,lrurec" in capsys.readouterr().err


def test_a_log_that_grew_since_the_run_is_not_resumed_into_its_checkpoint(
    tmp_path, capsys, monkeypatch
):
    """The same command on a file that gained items used to resume and fail deep in the trainer
    ("another model/config/data"); now it says the data changed and how to retrain."""
    monkeypatch.chdir(tmp_path)
    csv = tmp_path / "shop.csv"
    write_log_csv(csv, n_users=30, n_items=20, columns=("user", "item", "timestamp"), time_unit="s")
    argv = [
        "train",
        str(csv),
        "-m",
        "sasrec",
        "--set",
        "data.filter=none",
        "--set",
        "train.epochs=1",
        "--set",
        "model.dim=8",
        "--set",
        "train.num_threads=1",
    ]
    assert main(argv) == 0
    with open(csv, "a") as fh:
        fh.write("".join(f"u{i},new{i},1900000000\n" for i in range(3)))
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "shop.csv changed since the run in runs/shop-sasrec started" in err and "--fresh" in err
    assert "resuming the run" not in err
    assert main([*argv, "--fresh"]) == 0


def test_an_empty_data_argument_and_a_tune_without_a_model_are_refused(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    assert main(["train", "", "-m", "pop"]) != 0  # `seqrec train "$FILE"` with FILE unset
    assert "DATA is empty" in capsys.readouterr().err and not (tmp_path / "runs").exists()
    assert main(["tune", "--trials", "1"]) != 0
    assert "name the model to tune: seqrec tune DATA -m sasrec" in capsys.readouterr().err


def test_ignored_columns_are_named_with_the_kinds_of_event(tmp_path, capsys, monkeypatch):
    """RetailRocket's events.csv: the event column (view / addtocart / transaction) was ignored
    without a word, so a view counted as much as a purchase."""
    monkeypatch.chdir(tmp_path)
    rows = ["timestamp,visitorid,event,itemid,transactionid"]
    rows += [
        f"{1433221332117 + 1000 * i},{i % 4},{'view' if i % 3 else 'transaction'},{i % 5},"
        f"{'' if i % 3 else i}"
        for i in range(48)
    ]
    (tmp_path / "events.csv").write_text("\n".join(rows) + "\n")
    assert main(["train", "events.csv", "-m", "pop", "--set", "data.filter=none"]) == 0
    err = capsys.readouterr().err
    assert "ignored columns: event (view 32, transaction 16: every row counts the same" in err
    assert "data.events=KIND,KIND keeps only those kinds" in err and "; transactionid" in err
    # data.events keeps the kinds asked for, and says what it dropped
    assert (
        main(
            [
                "train",
                "events.csv",
                "-m",
                "pop",
                "--set",
                "data.filter=none",
                "--set",
                "data.events=transaction",
                "--out",
                "runs/tx",
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert "kept the rows whose event is transaction: 16 of 48 (dropped view 32)" in err
    assert (
        main(
            ["train", "events.csv", "-m", "pop", "--set", "data.events=purchase", "--out", "runs/p"]
        )
        == 2
    )
    assert "holds no 'purchase'; it holds view (32), transaction (16)" in capsys.readouterr().err


def test_a_filter_that_drops_most_users_says_what_suits_sessions(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = ["session_id,item_id,timestamp"]  # 40 sessions of 2-3 clicks, 10 long ones
    rows += [f"s{s},{(s + j) % 7},{100 * s + j}" for s in range(40) for j in range(2 + s % 2)]
    rows += [f"L{u},{j % 9},{10_000 + 100 * u + j}" for u in range(10) for j in range(8)]
    (tmp_path / "clicks.csv").write_text("\n".join(rows) + "\n")
    assert main(["train", "clicks.csv", "-m", "pop"]) == 0
    err = capsys.readouterr().err
    assert "preprocessing kept 10 of 50 users (20%)" in err
    assert (
        "the 5-core filter dropped most users: for a log of short sessions set data.filter=min_count"
        in err
    )
