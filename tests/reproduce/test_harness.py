"""The reproduction harness end to end on a tiny table: caching, resume after a kill or a
time budget, and the report."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import seqrec
from seqrec.errors import ConfigError
from seqrec.models.neural_config import settings
from seqrec_lab import load_table, reproduce
from seqrec_lab.runner import popularity_groups

TINY = """
title = "tiny"
description = "A tiny table for tests."
metrics = ["NDCG@10", "Recall@10"]
pairs = [{label = "pop vs sasrec", a = "pop", b = "sasrec"}]
findings = '''Pop misses its made-up number.

Second paragraph of findings.'''
[defaults]
seeds = [0]
[defaults.data]
filter = "k_core"
min_item = 5
[defaults.train]
num_threads = 1
[[runs]]
id = "pop"
dataset = "DATA"
model = "pop"
note = "counts of the training data"
[[runs.published]]
metric = "NDCG@10"
value = 0.02
source = "made up"
[[runs]]
id = "sasrec"
dataset = "DATA"
seeds = [0, 1]
[runs.model]
name = "sasrec"
max_len = 20
dim = 16
n_blocks = 1
[runs.train]
epochs = EPOCHS
"""


def _data(tmp_path: Path) -> Path:
    """A small learnable log (Markov chains over 40 items) as a CSV file."""
    from seqrec.testing.synthetic import markov_sequences

    seqs = markov_sequences(n_users=120, n_items=40, min_len=8, max_len=30, seed=3)
    lines = ["user_id,item_id,timestamp"]
    for u, row in enumerate(seqs):
        lines += [f"{u},{int(i)},{t}" for t, i in enumerate(row)]
    path = tmp_path / "log.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def _table(tmp_path: Path, epochs: int = 2) -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text(TINY.replace("EPOCHS", str(epochs)).replace("DATA", str(_data(tmp_path))))
    return path


def _dirs(root: Path) -> dict:
    return {
        "runs_dir": root / "runs",
        "results_dir": root / "results",
        "report_dir": root / "report",
        "state_dir": root / "state",
    }


def test_table_rejects_typos(tmp_path):
    bad = tmp_path / "bad.toml"
    good = _table(tmp_path).read_text()
    bad.write_text(good.replace("min_item = 5", "min_itme = 5"))
    with pytest.raises(ConfigError, match="min_itme"):
        load_table(bad)
    bad.write_text(good.replace('a = "pop"', 'a = "nope"'))
    with pytest.raises(ConfigError, match="unknown run 'nope'"):
        load_table(bad)
    with pytest.raises(ConfigError, match="no reproduction table"):
        load_table("no-such-table", root=tmp_path)


def test_reproduce_alone_lists_the_tables_and_a_misspelt_name_is_corrected(
    tmp_path, capsys, monkeypatch
):
    from seqrec.cli.main import main

    folder = tmp_path / "configs" / "reproduce"
    folder.mkdir(parents=True)
    (folder / "sasrec.toml").write_text(_table(tmp_path).read_text())
    monkeypatch.chdir(tmp_path)
    assert main(["reproduce"]) == 0
    out = capsys.readouterr().out
    title = load_table("sasrec").title
    assert title and f"sasrec  {title}" in out
    assert main(["reproduce", "sasrek"]) == 2
    assert "did you mean 'sasrec'?" in capsys.readouterr().err
    monkeypatch.chdir(tmp_path / "configs")  # no tables here: where they are, not an empty list
    assert main(["reproduce"]) == 2
    assert "no reproduction tables here" in capsys.readouterr().err


def test_a_table_name_outside_a_checkout_points_to_where_the_tables_are(tmp_path):
    # tmp_path has no configs/reproduce: the error names the checkout's table folder (or says
    # that the tables ship with a checkout) instead of listing no known tables
    with pytest.raises(ConfigError, match="does not exist here.*run `seqrec reproduce` from"):
        load_table("sasrec", root=tmp_path)
    (tmp_path / "configs" / "reproduce").mkdir(parents=True)
    with pytest.raises(ConfigError, match="known: none"):
        load_table("sasrec", root=tmp_path)


def test_a_rows_own_key_beats_the_table_default_in_either_section(tmp_path):
    # model and train are one parameter set: [defaults.train] num_threads must not override the
    # same key written in a row's [runs.model] (it did: train was merged last); a row's max_len
    # still beats [defaults.model]'s
    text = (
        _table(tmp_path)
        .read_text()
        .replace('name = "sasrec"\n', 'name = "sasrec"\nnum_threads = 2\n')
    )
    text = text.replace("[defaults.train]\n", "[defaults.model]\nmax_len = 7\n[defaults.train]\n")
    path = tmp_path / "own.toml"
    path.write_text(text)
    sasrec = next(r for r in load_table(path).runs if r.run_id == "sasrec")
    assert sasrec.experiment.model_params["num_threads"] == 2
    assert sasrec.experiment.model_params["max_len"] == 20
    plain = next(r for r in load_table(_table(tmp_path)).runs if r.run_id == "sasrec")
    assert plain.experiment.model_params["num_threads"] == 1  # without its own key, the default


def test_table_expands_seeds_and_selects(tmp_path):
    table = load_table(_table(tmp_path))
    assert [(r.run_id, r.seed) for r in table.runs] == [("pop", 0), ("sasrec", 0), ("sasrec", 1)]
    assert table.runs[1].experiment.model_config().dim == 16
    assert [r.run_id for r in table.select(models={"pop"})] == ["pop"]
    assert [r.seed for r in table.select(seeds={1})] == [1]


def test_second_run_trains_nothing_and_rewrites_the_same_report(tmp_path):
    table = load_table(_table(tmp_path))
    dirs = _dirs(tmp_path)
    first = reproduce(table, **dirs)
    assert len(first.trained) == 3 and not first.failed
    report = {p.name: p.read_bytes() for p in dirs["report_dir"].iterdir() if p.is_file()}
    assert {"tiny.md", "tiny.html", "tiny.json"} <= set(report)
    second = reproduce(table, **dirs)
    assert second.trained == []
    assert all(p.done for p in second.planned)
    again = {p.name: p.read_bytes() for p in dirs["report_dir"].iterdir() if p.is_file()}
    assert again == report
    md = report["tiny.md"].decode()
    assert "| pop | " in md and "made up" in md
    assert "Gaps" in md and "by user history length" in md and "head" in md
    assert "## Findings\n\nPop misses its made-up number.\n\nSecond paragraph" in md
    assert "Notes: pop: counts of the training data." in md
    summary = json.loads(report["tiny.json"])
    assert [r["run"] for r in summary["rows"]] == ["pop", "sasrec"]
    assert summary["rows"][1]["seeds"] == [0, 1]


def test_other_eval_settings_reuse_the_checkpoint(tmp_path):
    dirs = _dirs(tmp_path)
    table = load_table(_table(tmp_path))
    reproduce(table, table.select(models={"sasrec"}, seeds={0}), **dirs)
    text = (
        _table(tmp_path)
        .read_text()
        .replace("[defaults.train]", '[defaults.eval]\nseen_filter = "none"\n[defaults.train]')
    )
    other = tmp_path / "other.toml"
    other.write_text(text)
    t2 = load_table(other)
    out = reproduce(t2, t2.select(models={"sasrec"}, seeds={0}), **dirs)
    (p,) = out.planned
    assert (
        p.key == reproduce(table, table.select(models={"sasrec"}, seeds={0}), **dirs).planned[0].key
    )
    assert p.cached["seen_filter"] == "none"
    assert p.cached["global_step"] > 0 and p.cached["stopped"] == "epochs"


def test_budget_stop_then_resume_gives_the_uninterrupted_result(tmp_path):
    table = load_table(_table(tmp_path, epochs=6))
    runs = table.select(models={"sasrec"}, seeds={0})
    whole = reproduce(table, runs, **_dirs(tmp_path / "whole")).planned[0].cached
    dirs = _dirs(tmp_path / "cut")
    # a budget spent before training starts: the trainer stops after its first step
    cut = reproduce(table, runs, budget_seconds=1e-3, **dirs).planned[0]
    assert cut.cached is None and cut.partial is not None and cut.partial["partial"]
    # the unfinished run's checkpoint is kept in the state dir (compressed), so that a cleaned
    # run directory resumes from it
    assert (dirs["state_dir"] / cut.key / "last.pt.xz").exists()
    assert not (dirs["state_dir"] / cut.key / "last.pt").exists()
    import shutil

    shutil.rmtree(dirs["runs_dir"])
    done = reproduce(table, runs, **dirs).planned[0].cached
    assert done["metrics"] == whole["metrics"]
    assert done["best_epoch"] == whole["best_epoch"]
    assert not (dirs["state_dir"] / cut.key).exists()


def test_dry_run_says_how_far_an_unfinished_run_got_and_whether_it_resumes(tmp_path, capsys):
    from seqrec.cli.main import main
    from seqrec_lab import runner

    path = _table(tmp_path, epochs=6)
    table = load_table(path)
    dirs = _dirs(tmp_path)
    cut = reproduce(
        table, table.select(models={"sasrec"}, seeds={0}), budget_seconds=1e-3, **dirs
    ).planned[0]
    dry = [
        "reproduce",
        str(path),
        "--dry-run",
        "--runs",
        "sasrec",
        "--seeds",
        "0",
        *(
            x
            for k, v in dirs.items()
            if k != "report_dir"
            for x in (f"--{k.replace('_', '-')}", str(v))
        ),
    ]

    def status() -> str:
        capsys.readouterr()
        assert main(dry) == 0
        (line,) = [x for x in capsys.readouterr().out.splitlines() if cut.key in x]
        return line.split(cut.key, 1)[1].strip()

    # (stopped after its first step: no validation yet, so no best; the live case below has one)
    assert status().startswith(f"partial (epoch {cut.partial['epochs']}/6")
    assert "resumes from its run dir" in status()  # this machine still has the checkpoint
    import shutil

    shutil.rmtree(dirs["runs_dir"] / cut.key)
    assert "resumes from its saved state" in status()  # a fresh checkout: the committed state
    shutil.rmtree(dirs["state_dir"] / cut.key)
    assert status().endswith("no checkpoint here: restarts")
    # a run another process trains now is named so (its lock is held), with its live progress
    import fcntl

    run_dir = dirs["runs_dir"] / cut.key
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(
        json.dumps({"config": {"epochs": 6, "val_metric": "NDCG@10"}})
    )
    (run_dir / "validation.jsonl").write_text(
        "".join(
            json.dumps({"epoch": e, "metrics": {"NDCG@10": v}}) + "\n"
            for e, v in ((1, 0.2), (2, 0.3), (3, 0.25))
        )
    )
    with open(run_dir / "lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert runner.is_training(run_dir)
        assert status() == "training now (epoch 3/6, best valid NDCG@10 0.3000 at epoch 2)"
    assert not runner.is_training(run_dir)


def test_terminal_tables_right_align_numbers_and_left_align_text():
    from seqrec.cli.table import format_table

    lines = format_table(
        ["name", "n", "note"], [["a", 5, "short"], ["bb", 1234, "a longer note"]]
    ).splitlines()
    assert lines[2] == "a         5  short"
    assert lines[3] == "bb    1,234  a longer note"


def test_saved_state_is_compressed_and_plain_states_still_resume(tmp_path):
    from seqrec_lab import runner

    run_dir, state = tmp_path / "runs" / "k1", tmp_path / "state"
    run_dir.mkdir(parents=True)
    ckpt = bytes(range(256)) * 64 + b"\0" * 100_000  # compressible, like zero Adam moments
    (run_dir / "last.pt").write_bytes(ckpt)
    (run_dir / "run.json").write_text("{}")
    runner.save_state(run_dir, state, finished=False)
    packed = state / "k1" / "last.pt.xz"
    assert packed.exists() and packed.stat().st_size < len(ckpt) / 2
    fresh = tmp_path / "fresh" / "k1"
    assert runner.restore_state(fresh, state)
    assert (fresh / "last.pt").read_bytes() == ckpt and (fresh / "run.json").read_text() == "{}"
    assert not runner.restore_state(fresh, state)  # a run directory with a checkpoint keeps its own
    # a plain checkpoint written by older code after the packed one is the newer: it wins
    os.utime(packed, ns=(1, 1))
    (state / "k1" / "last.pt").write_bytes(b"newer")
    other = tmp_path / "other" / "k1"
    assert runner.restore_state(other, state) and (other / "last.pt").read_bytes() == b"newer"
    # saving again leaves one checkpoint, packed; finishing drops the state
    runner.save_state(run_dir, state, finished=False)
    assert sorted(f.name for f in (state / "k1").iterdir()) == ["last.pt.xz", "run.json"]
    runner.save_state(run_dir, state, finished=True)
    assert not (state / "k1").exists()


def test_checkpoint_packing_is_lossless_and_beats_plain_xz_on_float_weights():
    import lzma

    import numpy as np

    from seqrec_lab import runner

    rng = np.random.default_rng(0)
    weights = rng.normal(0.0, 0.05, 200_000).astype(np.float32).tobytes()
    for data in (weights, weights + b"tail", b"", b"abc"):  # tails that do not fill a word
        assert runner.unpack_checkpoint(runner.pack_checkpoint(data)) == data
    # the byte planes are what makes float32 compress: plain xz barely shrinks it
    assert len(runner.pack_checkpoint(weights)) < 0.95 * len(lzma.compress(weights, preset=6))
    # packs written by older code (plain xz of the checkpoint) still unpack
    assert runner.unpack_checkpoint(lzma.compress(weights)) == weights


def test_a_state_too_large_to_keep_is_copied_plain(tmp_path, monkeypatch):
    """Packing cannot bring a big state under the kept size: it is copied as is (fast)."""
    from seqrec_lab import runner

    monkeypatch.setattr(runner, "PACK_MAX_RAW_BYTES", 1000)
    run_dir, state = tmp_path / "runs" / "k1", tmp_path / "state"
    run_dir.mkdir(parents=True)
    (run_dir / "last.pt").write_bytes(b"\0" * 500)
    runner.save_state(run_dir, state, finished=False)
    assert sorted(f.name for f in (state / "k1").iterdir()) == ["last.pt.xz"]
    big = bytes(range(256)) * 8
    (run_dir / "last.pt").write_bytes(big)
    runner.save_state(run_dir, state, finished=False)  # the packed one is replaced, not left stale
    assert sorted(f.name for f in (state / "k1").iterdir()) == ["last.pt"]
    fresh = tmp_path / "fresh" / "k1"
    assert runner.restore_state(fresh, state) and (fresh / "last.pt").read_bytes() == big


def test_the_state_folder_is_local_ignored_by_git_and_configurable(monkeypatch):
    """Checkpoints are never committed: the default state folder is ignored by the checkout's
    .gitignore, the old committed folder is gone, and $SEQREC_STATE_DIR moves it."""
    import shutil

    from seqrec_lab.harness import DEFAULT_STATE_DIR, STATE_ENV, default_state_dir

    monkeypatch.delenv(STATE_ENV, raising=False)
    assert default_state_dir() == DEFAULT_STATE_DIR
    monkeypatch.setenv(STATE_ENV, "/somewhere/else")
    assert default_state_dir() == Path("/somewhere/else")
    root = Path(__file__).resolve().parents[2]
    if shutil.which("git") is None or not (root / ".git").exists():
        pytest.skip("not a git checkout")
    git = lambda *a: subprocess.run(["git", *a], cwd=root, capture_output=True, text=True)  # noqa: E731
    assert (
        git("check-ignore", "-q", f"{DEFAULT_STATE_DIR}/0123456789abcdef/last.pt.xz").returncode
        == 0
    )
    assert git("ls-files", "reproduce-state", str(DEFAULT_STATE_DIR)).stdout == ""


def test_a_run_started_elsewhere_without_its_state_restarts_and_says_so(tmp_path):
    """A fresh clone has the partial record of an unfinished run but not its checkpoint."""
    import shutil

    table = load_table(_table(tmp_path, epochs=2))
    runs = table.select(models={"sasrec"}, seeds={0})
    dirs = _dirs(tmp_path)
    cut = reproduce(table, runs, budget_seconds=1e-3, **dirs).planned[0]
    assert cut.partial is not None
    shutil.rmtree(dirs["runs_dir"])
    shutil.rmtree(dirs["state_dir"])
    said: list[str] = []
    done = reproduce(table, runs, on_event=said.append, **dirs).planned[0]
    assert done.cached is not None
    assert any(
        "no saved state for sasrec seed 0: starting from epoch 0" in line for line in said
    ), said


def _cli(path: Path, *options: str) -> list[str]:
    """``seqrec reproduce`` of the table at ``path`` as a subprocess command, dirs under r/."""
    return [
        sys.executable,
        "-m",
        "seqrec.cli.main",
        "reproduce",
        str(path),
        "--runs-dir",
        "r/runs",
        "--results-dir",
        "r/results",
        "--report-dir",
        "r/report",
        *options,
    ]


# the subprocesses import the seqrec under test, whatever the working directory and installation
_SRC = str(Path(seqrec.__file__).resolve().parents[1])
ENV = {
    **os.environ,
    "OMP_NUM_THREADS": "1",
    "PYTHONPATH": os.pathsep.join(p for p in (_SRC, os.environ.get("PYTHONPATH")) if p),
}


@pytest.mark.slow
def test_killed_run_resumes_to_the_same_result(tmp_path):
    path = _table(tmp_path, epochs=40)
    cmd = _cli(path, "--runs", "sasrec", "--seeds", "0", "--state-dir", "none")
    env = ENV
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.time() + 120
    ckpts = []
    while time.time() < deadline and not ckpts:
        ckpts = list((tmp_path / "r" / "runs").glob("*/last.pt"))
        time.sleep(0.2)
    assert ckpts, "no checkpoint appeared"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not list((tmp_path / "r" / "results").glob("*.json")), "finished before the kill"
    assert not list((tmp_path / "r" / "results").glob("*.tmp"))
    rerun = subprocess.run(cmd, cwd=tmp_path, env=env, check=True, capture_output=True, text=True)
    assert "resumed from" in rerun.stderr, "the rerun started over instead of resuming"
    (resumed,) = [json.loads(p.read_text()) for p in (tmp_path / "r" / "results").glob("*.json")]
    whole = (
        reproduce(
            load_table(path),
            load_table(path).select(models={"sasrec"}, seeds={0}),
            **_dirs(tmp_path / "whole"),
        )
        .planned[0]
        .cached
    )
    # the model's own defaults (no recipe pinned in the table): the subprocess must have run
    # the same code and configuration as this process (tests/conftest.py), else the comparison
    # below says nothing about resuming
    assert resumed["key"] == whole["key"], "the subprocess ran another seqrec or configuration"
    assert resumed["metrics"] == whole["metrics"]
    assert resumed["global_step"] == whole["global_step"]
    curve = lambda rec: [(h["epoch"], h["metrics"]) for h in rec["validation_history"]]  # noqa: E731
    assert curve(resumed) == curve(whole)  # every validation, not only the one kept


def test_popularity_groups_split_traffic_in_thirds():
    counts = [0, 50, 30, 10, 5, 3, 2, 0]  # id 0 is padding; id 7 never seen
    g = popularity_groups(counts)
    assert g[1] == 0 and g[7] == 2 and g[0] == 2
    assert list(g[1:7]) == sorted(g[1:7])  # more popular -> lower group
    assert set(g[1:7]) == {0, 1, 2}


def test_the_results_overview_is_generated_from_the_reports(tmp_path):
    from seqrec_lab.readme import write_overview

    dirs = _dirs(tmp_path)
    table = load_table(_table(tmp_path))
    reproduce(table, table.select(models={"pop"}), **dirs)
    path = write_overview(dirs["report_dir"])
    assert path == dirs["report_dir"] / "README.md"
    text = path.read_text()
    assert f"## [{table.title}](tiny.md)" in text and "1 of 2 rows finished" in text
    assert "| pop | " in text and "0.0200" in text  # the row and its published value
    assert "Not run yet: sasrec (" in text and "| sasrec |" not in text  # compact: no empty rows
    mtime = path.stat().st_mtime_ns
    write_overview(dirs["report_dir"])
    assert path.stat().st_mtime_ns == mtime  # unchanged text: not rewritten


def test_a_study_is_one_line_of_the_overview(tmp_path):
    from seqrec_lab.readme import section

    rows = [
        {
            "label": f"r{i}",
            "dataset": "d",
            "finished": i < 3,
            "seeds": [0] if i < 3 else [],
            "test": {"NDCG@10": 0.1} if i < 3 else {},
        }
        for i in range(40)
    ]
    (tmp_path / "defaults.json").write_text(
        json.dumps({"table": "defaults", "title": "Recipes", "rows": rows})
    )
    text = section(tmp_path)
    assert (
        "- **[Recipes](defaults.md)** (`seqrec reproduce defaults`): 3 of 40 rows finished." in text
    )
    assert "| r0 |" not in text


@pytest.mark.slow
def test_seqrec_reproduce_leaves_the_repository_readme_byte_identical(tmp_path):
    """``seqrec reproduce X`` writes its reports and their overview (docs/reproduce/README.md),
    never the README.md of the checkout it runs in, whatever the report directory."""
    from seqrec_lab.readme import section

    path = _table(tmp_path)
    readme = tmp_path / "README.md"
    original = (
        b"# x\n<!-- reproduce:start -->\nthe checkout's own text\n<!-- reproduce:end -->\n\xc3\xa9"
    )
    readme.write_bytes(original)
    subprocess.run(
        _cli(path, "--runs", "pop"), cwd=tmp_path, env=ENV, check=True, capture_output=True
    )
    assert readme.read_bytes() == original
    assert (tmp_path / "r" / "report" / "README.md").read_text() == section(
        tmp_path / "r" / "report"
    )
    # the default report directory (docs/reproduce) refreshes its overview there, not the README
    subprocess.run(
        _cli(path, "--runs", "pop")[:-6] + ["--results-dir", "r/results", "--report-only"],
        cwd=tmp_path,
        env=ENV,
        check=True,
        capture_output=True,
    )
    assert readme.read_bytes() == original
    assert "| pop | " in (tmp_path / "docs" / "reproduce" / "README.md").read_text()


def test_the_committed_overview_is_what_the_generator_writes_and_the_readme_is_untouched(tmp_path):
    import shutil

    from seqrec_lab.readme import section, write_overview

    root = Path(__file__).resolve().parents[2]
    reports = root / "docs" / "reproduce"
    if not (reports / "README.md").exists():
        pytest.skip("no committed reports here")
    before = (root / "README.md").read_bytes()
    assert (reports / "README.md").read_text() == section(reports), (
        "docs/reproduce/README.md is stale or edited by hand: seqrec reproduce NAME --report-only rewrites it"
    )
    for summary in reports.glob("*.json"):
        shutil.copy(summary, tmp_path)
    write_overview(tmp_path)
    assert (tmp_path / "README.md").read_text() == (reports / "README.md").read_text()
    assert (root / "README.md").read_bytes() == before


def test_no_run_starts_once_the_budget_is_spent(tmp_path):
    table = load_table(_table(tmp_path))
    dirs = _dirs(tmp_path)
    out = reproduce(table, budget_seconds=1e-9, **dirs)
    # the first run always makes progress (pop: a whole fit); the later ones do not start
    assert [p.spec.run_id for p in out.planned if p.cached or p.partial] == ["pop"]
    assert out.trained == [out.planned[0].key] and not out.failed


POP_ONLY = """
title = "pops"
description = "Pop twice: the second run is never trained while its data is present."
metrics = ["NDCG@10"]
[defaults]
seeds = [0]
[defaults.data]
filter = "none"
[[runs]]
id = "pop"
dataset = "DATA"
model = "pop"
"""
LATER_RUN = """
[[runs]]
id = "pop-5core"
dataset = "DATA"
model = "pop"
[runs.data]
filter = "k_core"
min_item = 5
"""


def test_a_run_whose_dataset_is_missing_is_skipped_and_stored_ones_still_report(tmp_path):
    from seqrec_lab import runner
    from seqrec_lab.harness import plan

    data = _data(tmp_path)
    path = tmp_path / "pops.toml"
    path.write_text(POP_ONLY.replace("DATA", str(data)))
    dirs = _dirs(tmp_path)
    first = reproduce(load_table(path), **dirs)
    assert len(first.trained) == 1 and not first.skipped
    data.rename(tmp_path / "elsewhere.csv")  # the dataset leaves this machine
    runner._DATA_CACHE.clear()  # as in a new process
    path.write_text((POP_ONLY + LATER_RUN).replace("DATA", str(data)))
    table = load_table(path)
    planned = {
        p.spec.run_id: p for p in plan(table, table.runs, dirs["runs_dir"], dirs["results_dir"])
    }
    assert planned["pop"].done and "file not found" in planned["pop"].unavailable
    assert planned["pop-5core"].cached is None and planned["pop-5core"].unavailable
    outcome = reproduce(table, **dirs)  # no exception: the missing data skips one run
    assert outcome.trained == [] and list(outcome.skipped) == ["pop-5core"]
    md = (dirs["report_dir"] / "pops.md").read_text()
    ndcg = first.planned[0].cached["metrics"]["test"]["NDCG@10"]
    assert f"{ndcg:.4f}" in md  # the stored run is in the report, matched without its data


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("90m", 5400),
        ("2h", 7200),
        ("2h30m", 9000),
        ("1h 5m 30s", 3930),
        ("3600s", 3600),
        ("45", 45),
        ("0.5h", 1800),
    ],
)
def test_budget_durations_combine_units(text, seconds):
    from seqrec_lab.cli import parse_duration

    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0m", "h", "2x", "30m2h", "-1m", "1h1h"])
def test_bad_budget_durations_are_refused(text):
    from seqrec_lab.cli import parse_duration

    with pytest.raises(ConfigError, match="--budget"):
        parse_duration(text)


def test_batch_targets_counts_in_a_run_identity_only_when_it_sizes_the_batch(tmp_path):
    """A record made while batch_targets had another default (or none) is the same run when
    batch_size is given, and another run when batch_size = 0 lets batch_targets size it."""
    import dataclasses

    from seqrec.models.sasrec import SASRec, SASRecConfig
    from seqrec.models.torch_recommender import _check_same_config
    from seqrec_lab.runner import compatible

    def ident(**cfg):
        return {"model": "sasrec", "model_config": cfg, "data": {}, "seed": 0}

    assert compatible(
        ident(batch_size=128, batch_targets=0), ident(batch_size=128, batch_targets=1024)
    )
    assert compatible(ident(batch_size=128), ident(batch_size=128, batch_targets=1024))
    assert not compatible(
        ident(batch_size=0, batch_targets=512), ident(batch_size=0, batch_targets=1024)
    )
    assert not compatible(
        ident(batch_size=128, batch_targets=1024), ident(batch_size=0, batch_targets=1024)
    )
    # a checkpoint directory: the same rule when a run resumes
    cfg = settings(SASRecConfig, batch_size=64, batch_targets=0)
    _check_same_config(tmp_path, cfg, SASRec.name, 10)
    _check_same_config(tmp_path, dataclasses.replace(cfg, batch_targets=1024), SASRec.name, 10)
    with pytest.raises(ConfigError, match="batch_size"):
        _check_same_config(tmp_path, dataclasses.replace(cfg, batch_size=0), SASRec.name, 10)


def test_a_record_from_before_min_epoch_steps_reads_it_as_off(tmp_path):
    """min_epoch_steps was added with SASRec's default at 100: a stored config without it trained
    without it, so it matches an identity with 0 and not one with today's default; with a given
    batch_size the field is inert."""
    import json

    from seqrec.models.sasrec import SASRec, SASRecConfig
    from seqrec.models.torch_recommender import _check_same_config
    from seqrec_lab.runner import compatible

    def ident(**cfg):
        return {"model": "sasrec", "model_config": cfg, "data": {}, "seed": 0}

    legacy = ident(batch_size=0, batch_targets=1024)
    assert compatible(
        legacy, ident(batch_size=0, batch_targets=1024, min_epoch_steps=0, auto_batch_max=128)
    )
    assert not compatible(
        legacy, ident(batch_size=0, batch_targets=1024, min_epoch_steps=100, auto_batch_max=128)
    )
    assert compatible(
        ident(batch_size=128), ident(batch_size=128, min_epoch_steps=100, auto_batch_max=64)
    )
    # a checkpoint written before the field existed resumes only under the behaviour it had
    cfg = settings(SASRecConfig, batch_size=0, min_epoch_steps=0)
    _check_same_config(tmp_path, cfg, SASRec.name, 10)
    meta = json.loads((tmp_path / "run.json").read_text())
    del meta["config"]["min_epoch_steps"], meta["config"]["auto_batch_max"]
    (tmp_path / "run.json").write_text(json.dumps(meta))
    _check_same_config(tmp_path, cfg, SASRec.name, 10)
    (tmp_path / "run.json").write_text(json.dumps(meta))
    with pytest.raises(ConfigError, match="min_epoch_steps"):
        _check_same_config(tmp_path, settings(SASRecConfig, batch_size=0), SASRec.name, 10)


def test_readme_section_shows_the_metrics_with_published_values_first(tmp_path):
    from seqrec_lab.readme import section

    summary = {
        "table": "t",
        "title": "T",
        "rows": [
            {
                "label": "a",
                "dataset": "d",
                "finished": True,
                "seeds": [0],
                "test": {"HR@5": 0.5, "HR@10": 0.6, "NDCG@10": 0.3},
                "published": [{"metric": "NDCG@10", "value": 0.25}],
            }
        ],
    }
    (tmp_path / "t.json").write_text(json.dumps(summary))
    text = section(tmp_path)
    assert "| row | dataset | NDCG@10 | HR@5 | published NDCG@10 | gap | status |" in text
    assert "| a | d | 0.3000 | 0.5000 | 0.2500 | +20.0% | finished |" in text


def test_readme_section_says_when_a_row_has_fewer_finished_seeds_than_planned(tmp_path):
    """RecTools' ML-1M row showed 'finished' with one of three seeds: its mean is that seed's."""
    from seqrec_lab.readme import section

    row = {
        "label": "a",
        "dataset": "d",
        "finished": True,
        "seeds": [0, 1],
        "test": {"NDCG@10": 0.3},
    }
    summary = {
        "table": "t",
        "title": "T",
        "rows": [
            {**row, "seeds_finished": 1, "seeds_planned": 3},
            {**row, "label": "b", "seeds_finished": 3, "seeds_planned": 3},
        ],
    }
    (tmp_path / "t.json").write_text(json.dumps(summary))
    text = section(tmp_path)
    assert "| a | d | 0.3000 | – | – | 1 of 3 seeds finished |" in text
    assert "| b | d | 0.3000 | – | – | finished |" in text
