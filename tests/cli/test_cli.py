"""End-to-end CLI checks: the quickstart path works and malformed input gives one-line errors."""

import json
import subprocess
import sys

import pytest

from seqrec.cli.main import main


def _run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_models_and_data_list(capsys):
    from seqrec.registry import MODELS, SUMMARIES

    code, out, _ = _run(capsys, "models")
    assert code == 0 and set(SUMMARIES) == set(MODELS)  # a new model needs its line
    for name in MODELS:
        assert f"{name:10s} {SUMMARIES[name]}" in out
    code, out, _ = _run(capsys, "data", "list")
    assert code == 0 and "ml-latest-small" in out


def test_describe_shipped_dataset(capsys):
    code, out, _ = _run(capsys, "data", "describe", "ml-latest-small")
    assert code == 0
    assert "610" in out and "100,836" in out
    assert "1996-03-29 18:36:55 UTC (828,124,615)" in out  # dates, so a wrong unit shows
    # what train's default 5-core keeps of it (ml-latest-small's items with < 5 ratings go)
    assert "train_keeps     610 users, 3,650 items, 90,274 interactions (filter k_core 5/5" in out


def test_describe_counts_repeats_and_says_when_the_filter_keeps_nothing(tmp_path, capsys):
    log = tmp_path / "log.csv"
    log.write_text("user,item,timestamp\n1,10,1\n1,10,2\n1,11,3\n2,10,4\n")
    code, out, _ = _run(capsys, "data", "describe", str(log))
    assert code == 0 and "repeated_pairs  1" in out
    assert "train_keeps     nothing (filter k_core 5/5): lower data.min_user" in out
    code, out, _ = _run(capsys, "data", "describe", str(log), "--set", "data.filter=none")
    assert "train_keeps     2 users, 2 items, 4 interactions (filter none" in out
    assert "columns         user=user, item=item, timestamp=timestamp" in out  # what was read


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["data", "describe", "no-such-dataset"], "unknown"),
        (["train", "--set", "model.name=no-such-model"], "unknown model"),
        (["train", "--set", "eval.seen_filter=bogus"], "seen_filter"),
        (["train", "--set", "data.filter=bogus"], "filter"),
        (["train", "--set", "model.nonsense=1"], "valid keys"),
        (["train", "--config", "missing.toml"], "does not exist"),
        (
            ["recommend", "no/such/artifact", "1"],
            "no/such/artifact does not exist: pass the run directory",
        ),
        # no empty progress bar before the error (the bar starts on the first byte)
        (["data", "download", "no-such-dataset"], "no download for dataset"),
    ],
)
def test_bad_input_gives_one_line_error(capsys, argv, fragment):
    code, _, err = _run(capsys, *argv)
    assert code == 2
    lines = [ln for ln in err.strip().splitlines() if ln]
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    assert fragment in lines[0]
    assert "Traceback" not in err


def test_bad_files_give_one_line_error(tmp_path, capsys):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    garbage = tmp_path / "garbage.csv"
    garbage.write_text("user,item,timestamp\n1,2,3\nnot,a,number\n")
    missing = tmp_path / "missing.csv"
    missing.write_text("user,item\n1,2\n")
    for path in (empty, garbage, missing):
        code, _, err = _run(capsys, "data", "describe", str(path))
        assert code == 2 and err.startswith("error:") and len(err.strip().splitlines()) == 1, err


def test_train_recommend_roundtrip(tmp_path, capsys):
    out = tmp_path / "run"
    code, text, err = _run(capsys, "train", "--set", "model.name=pop", "--out", str(out))
    assert code == 0, err
    assert "NDCG@10" in text and (out / "model" / "model.json").exists()
    shown = text.split("next: seqrec recommend ", 1)[1].split("|")[0].split()
    assert shown[:2] == [str(out), "--user"]  # with a real user of the run; that command works:
    code, listed, err = _run(capsys, "recommend", *shown, "-k", "2")
    assert code == 0 and "stored items" in listed, err
    assert list(out.glob("*.json")) and list(out.glob("*.md"))
    code, text, err = _run(
        capsys, "recommend", str(out / "model"), "1", "2", "999999999", "-k", "3"
    )
    assert code == 0, err
    assert "skipped 1 unknown" in text
    rows = [ln for ln in text.splitlines() if ln[:1].isdigit()]
    assert len(rows) == 3
    # ids printed exactly as read: "2,571" pasted back into --history was two unknown ids
    code, text, err = _run(capsys, "recommend", str(out / "model"), "1", "-k", "10")
    ids = [ln.split()[1] for ln in text.splitlines() if ln[:1].isdigit()]
    assert len(ids) == 10 and any(int(i) >= 1000 for i in ids), ids
    assert all(i.isdigit() for i in ids), ids


def test_console_script_entry_point():
    res = subprocess.run(
        [sys.executable, "-m", "seqrec.cli.main", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0 and "seqrec" in res.stdout


def test_data_and_model_shortcuts_fold_into_set_overrides(tmp_path, capsys):
    import argparse

    from seqrec.cli.main import build_parser
    from seqrec.cli.shortcuts import fold_shortcuts

    def folded(*argv):
        args = build_parser().parse_args(list(argv))
        fold_shortcuts(args)
        return args

    args = folded("train", "shop.csv", "-m", "sasrec", "--set", "train.epochs=2")
    assert args.overrides == ["data.name=shop.csv", "model.name=sasrec", "train.epochs=2"]
    args = folded("train", "exp.toml")  # the positional config `seqrec tune` also takes
    assert args.config == "exp.toml" and args.overrides == []
    args = folded("data", "prepare", "ml-latest-small", "--out", str(tmp_path))
    assert args.overrides == ["data.name=ml-latest-small"]
    assert isinstance(folded("train"), argparse.Namespace)  # no shortcut: nothing changes
    for argv, fragment in [
        (("train", "sasrec"), "is a model, not a dataset: pass it as --model sasrec"),
        (("train", "shop.csv", "-m", "SASRek"), "did you mean 'sasrec'"),
        (("train", "shop.csv", "--set", "data.name=x"), "data.name given twice"),
        (("train", "a.toml", "-c", "b.toml"), "two configs given"),
    ]:
        code, _, err = _run(capsys, *argv)
        assert code == 2 and fragment in err and len(err.strip().splitlines()) == 1, err


def test_train_takes_an_own_file_positionally(tmp_path, capsys):
    log = tmp_path / "log.csv"
    log.write_text(
        "user,item,timestamp\n"
        + "".join(f"{u},{(u + k) % 7},{k}\n" for u in range(12) for k in range(6))
    )
    out = tmp_path / "run"
    code, text, err = _run(
        capsys, "train", str(log), "-m", "pop", "--set", "data.filter=none", "--out", str(out)
    )
    assert code == 0, err
    identity = json.loads((out / "experiment.json").read_text())["identity"]
    assert identity["data"]["name"] == str(log) and identity["model"] == "pop"
    assert "no model named" not in err
    code, _, err = _run(capsys, "train", str(log), "--set", "data.filter=none", "--out", str(out))
    assert code == 0 and "note: no model named, so this trains 'pop'" in err  # said, not silent


def test_bare_seqrec_prints_the_help_with_first_steps(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert (
        out.startswith("usage: seqrec") and "first steps:" in out and "seqrec demo shop.csv" in out
    )
    assert "owns the terminal" not in out  # the module docstring is for developers


def test_mappings_print_lists_one_per_line_and_dicts_as_pairs():
    from seqrec.cli.table import format_mapping

    text = format_mapping(
        {"n_users": 1200, "notes": ["read x.csv", "5-core"], "seconds": {"load": 0.5}}
    )
    assert text.splitlines() == [
        "n_users  1,200",
        "notes    read x.csv",
        "         5-core",
        "seconds  load 0.5000",
    ]


def test_doctor_reports_the_installation_and_names_missing_extras(capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "openpyxl", None)  # as if the excel extra were not installed
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "torch " in out and "shipped data    ml-latest-small loads (100,836 interactions)" in out
    assert "extra excel     no: pip install 'seqrec[excel]'" in out
    assert "extra tune" in out and "data dir" in out
    assert "allocator" in out  # what seqrec.allocator.describe says (tests/test_allocator.py)
