"""Peer rows of the reproduction harness (``peer:<library>``), with a fake library whose worker
runs in this interpreter (no venv, no install): parsing, identity and caching, the scoring of
its lists by seqrec's evaluator, the record and the side-by-side report columns."""

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from seqrec.data.sequences import Sequences, Targets
from seqrec.errors import ConfigError, SeqRecError
from seqrec.evaluation import evaluate
from seqrec_lab import load_table, peers, reproduce

# The fake worker: epoch 1 returns each user's least popular unseen items (a poor list), epoch 2
# (the final model) the true target first, so the final lists score exactly 1.0 only if the
# harness lines up users, targets and histories correctly.
WORKER = """
import json, sys, time
from pathlib import Path
import numpy as np

work, out, args = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3])
s = np.load(work / "split.npz")
n, k = int(s["n_items"]), args["k"]
counts = np.bincount(s["train_items"], minlength=n + 1)

def lists(prefix, targets):
    off, items = s[prefix + "_offsets"], s[prefix + "_items"]
    out_ = np.zeros((len(s["eval_rows"]), k), np.int64)
    for i, row in enumerate(s["eval_rows"]):
        seen = set(items[off[row]:off[row + 1]].tolist())
        rest = [j for j in np.argsort(counts[1:], kind="stable") + 1 if j not in seen]
        if targets is not None:
            rest = [int(targets[i])] + [j for j in rest if j != targets[i]]
        out_[i, :min(k, len(rest))] = rest[:k]
    return out_

np.save(out / "valid_topk_epoch001.npy", lists("train", None))
np.save(out / "valid_topk_epoch002.npy", lists("train", s["valid_items"]))
np.save(out / "valid_topk.npy", lists("train", s["valid_items"]))
np.save(out / "test_topk.npy", lists("train_valid", s["test_items"]))
curve = [{"epoch": 1, "seconds": 0.5, "topk_file": "valid_topk_epoch001.npy"},
         {"epoch": 2, "seconds": 1.25, "topk_file": "valid_topk_epoch002.npy"}]
info = {"library": "fake", "version": "9.9", "config": {"echo": args}, "fit_seconds": 1.25,
        "epochs": 2, "steps": 4, "params": 123, "loss": "ce", "stopped": "epochs",
        "selected_epoch": 2, "curve": curve, "peak_rss_mb": 42.0}
(out / "info.json").write_text(json.dumps(info))
(out / "calls").open("a").write("x")
"""

TABLE = """
title = "peers tiny"
metrics = ["NDCG@10", "Recall@10"]
[defaults]
seeds = [0]
[defaults.data]
filter = "k_core"
min_item = 5
[defaults.eval]
ks = [10]
seen_filter = "history"
[defaults.model]
dim = 16
n_blocks = 1
max_len = 20
[defaults.train]
num_threads = 1
[[runs]]
id = "seqrec"
dataset = "DATA"
[runs.model]
name = "sasrec"
[runs.train]
epochs = 2
[[runs]]
id = "fake"
label = "Fake peer"
dataset = "DATA"
[runs.model]
name = "peer:fake"
[runs.train]
epochs = 2
"""


@pytest.fixture
def fake_peer(tmp_path, monkeypatch):
    wdir = tmp_path / "workers"
    wdir.mkdir()
    (wdir / "peer_fake.py").write_text(WORKER)
    monkeypatch.setitem(
        peers.PEERS,
        "fake",
        {"python": sys.executable, "version": "9.9", "revision": 1, "packages": []},
    )
    monkeypatch.setattr(peers, "worker_dir", lambda: wdir)
    monkeypatch.setattr(peers, "ensure_venv", lambda library, root: Path(sys.executable))
    return wdir


def _table(tmp_path: Path, text: str = TABLE) -> Path:
    from seqrec.testing.synthetic import markov_sequences

    seqs = markov_sequences(n_users=80, n_items=40, min_len=10, max_len=25, seed=5)
    lines = ["user_id,item_id,timestamp"]
    for u, row in enumerate(seqs):  # no repeats: a repeated target is filtered, even an oracle's
        row = list(dict.fromkeys(int(i) for i in row))
        lines += [f"{u},{i},{t}" for t, i in enumerate(row)]
    (tmp_path / "log.csv").write_text("\n".join(lines) + "\n")
    path = tmp_path / "tiny.toml"
    path.write_text(text.replace("DATA", str(tmp_path / "log.csv")))
    return path


def _dirs(root: Path) -> dict:
    return {
        "runs_dir": root / "runs",
        "results_dir": root / "results",
        "report_dir": root / "report",
        "state_dir": None,
    }


def test_peer_rows_parse_and_reject_typos(tmp_path, fake_peer):
    table = load_table(_table(tmp_path))
    fake = table.runs[1]
    assert fake.model == "peer:fake" and fake.experiment.model_params["epochs"] == 2
    # shared model keys reach the peer; its config is validated like a model's
    cfg = peers.peer_config(fake.model, fake.experiment.model_params, fake.seed)
    assert (cfg.library, cfg.dim, cfg.n_blocks, cfg.max_len, cfg.epochs) == ("fake", 16, 1, 20, 2)
    with pytest.raises(ConfigError, match="learning_rate"):
        load_table(
            _table(
                tmp_path,
                TABLE.replace('name = "peer:fake"', 'name = "peer:fake"\nlearning_rate = 1'),
            )
        )
    with pytest.raises(ConfigError, match="peer library must be one of"):
        load_table(_table(tmp_path, TABLE.replace("peer:fake", "peer:nope")))
    with pytest.raises(ConfigError, match="dropout"):
        load_table(
            _table(
                tmp_path, TABLE.replace('name = "peer:fake"', 'name = "peer:fake"\ndropout = 1.5')
            )
        )


def test_peer_row_is_scored_cached_and_reported(tmp_path, fake_peer):
    table = load_table(_table(tmp_path))
    dirs = _dirs(tmp_path)
    first = reproduce(table, **dirs)
    assert not first.failed and len(first.trained) == 2
    rec = next(p.cached for p in first.planned if p.spec.run_id == "fake")
    # the oracle's final lists, scored by seqrec's evaluator, are perfect; epoch 1's are not
    assert rec["metrics"]["test"]["NDCG@10"] == 1.0 and rec["metrics"]["valid"]["Recall@10"] == 1.0
    hist = rec["validation_history"]
    assert [h["epoch"] for h in hist] == [1, 2] and hist[0]["metrics"]["NDCG@10"] < 0.5
    assert (rec["best_epoch"], rec["best_valid"], rec["stopped"]) == (2, 1.0, "epochs")
    assert (rec["library"], rec["library_version"], rec["peak_rss_mb"]) == ("fake", "9.9", 42.0)
    assert (
        rec["identity"]["code"].endswith("peer-fake-9.9.r1") and rec["seconds_per_epoch"] == 0.625
    )
    assert rec["load_average"]["samples"] >= 2
    seqrec_rec = next(p.cached for p in first.planned if p.spec.run_id == "seqrec")
    assert seqrec_rec["peak_rss_mb"] > 0 and "load_average" in seqrec_rec
    # cached by identity: a second run trains nothing; another peer budget trains again
    calls = next((tmp_path / "runs").glob("*/calls"))
    assert reproduce(table, **dirs).trained == [] and calls.read_text() == "x"
    md = (dirs["report_dir"] / "tiny.md").read_text()
    assert "## Side by side" in md
    row = next(line for line in md.splitlines() if line.startswith("| Fake peer | fake 9.9"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # test NDCG@10, Recall@10, best valid, epochs, s/epoch, s to own best, seqrec s to reach it,
    # ratio, RSS
    assert cells[3:12] == [
        "1.0000",
        "1.0000",
        "1.0000",
        "2",
        "0.62",
        "1",
        "–, never (1)",
        "–",
        "42",
    ]
    longer = TABLE[::-1].replace("2 = shcope", "3 = shcope", 1)[::-1]  # the peer's epochs only
    again = reproduce(load_table(_table(tmp_path, longer)), **dirs)
    assert len(again.trained) == 1 and all(p.done for p in again.planned)
    assert calls.read_text() == "xx"


def test_topk_lists_score_like_the_model_that_made_them():
    rng = np.random.default_rng(0)
    n_items, n_users = 30, 12
    rows = [
        list(rng.choice(np.arange(1, n_items + 1), size=int(rng.integers(3, 8)), replace=False))
        for _ in range(n_users)
    ]
    offsets = np.concatenate([[0], np.cumsum([len(r) for r in rows])])
    seqs = Sequences(offsets, np.concatenate(rows), n_items=n_items)
    targets = Targets(seqs, np.arange(n_users), seqs.lengths - 1, np.array([r[-1] for r in rows]))
    hist = targets.histories()
    dense, tops = {}, []
    for i in range(n_users):
        s = rng.normal(size=n_items + 1)
        s[0] = -np.inf
        dense[hist.row(i).tobytes()] = s
        masked = s.copy()
        masked[hist.row(i)] = -np.inf  # the peer filters the history itself
        tops.append(np.argsort(-masked, kind="stable")[:10])

    class Dense:
        def score(self, histories, query_times=None):
            return np.stack([dense[histories.row(i).tobytes()] for i in range(len(histories))])

    truth = evaluate(Dense(), targets, ks=(5, 10), seen_filter="history")
    lists = peers.TopKLists(hist, np.arange(n_users), np.array(tops), n_items, max_len=50)
    got = evaluate(lists, targets, ks=(5, 10), seen_filter="history")
    for m in ("NDCG@5", "NDCG@10", "HR@10"):
        assert abs(got.metrics[m] - truth.metrics[m]) < 1e-12, m
    assert truth.metrics["HR@10"] > 0  # the check is not vacuous


def test_exported_split_is_what_the_workers_read(tmp_path, fake_peer):
    table = load_table(_table(tmp_path))
    from seqrec_lab.runner import prepared_data

    split = prepared_data(table.runs[0]).split
    peers.export_split(split, tmp_path / "x")
    train = np.loadtxt(tmp_path / "x" / "train.csv", delimiter=",", skiprows=1, dtype=np.int64)
    user1 = train[train[:, 0] == 1][:, 1]
    assert np.array_equal(user1, split.train.row(0))
    valid = np.loadtxt(tmp_path / "x" / "valid.csv", delimiter=",", skiprows=1, dtype=np.int64)
    assert np.array_equal(valid[:, 1], split.valid.items) and json.dumps(int(valid[0, 0])) == "1"


# A worker that trains "epochs" until peer_stop says stop, as the real workers do at epoch ends.
LOOPING_WORKER = """
import json, sys, time
from pathlib import Path
import peer_stop

peer_stop.install()
work, out, args = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3])
(out / "started").write_text(str(__import__("os").getpid()))
epoch, why = 0, None
while why is None and epoch < 600:
    time.sleep(0.1)
    epoch += 1
    why = peer_stop.reason(out, args.get("deadline"))
(out / "info.json").write_text(json.dumps({"stopped": why or "epochs", "epochs": epoch}))
"""


@pytest.mark.parametrize("how", ["harness", "worker_signal", "deadline"])
def test_a_stop_reaches_the_peer_worker_which_ends_its_epoch(tmp_path, monkeypatch, how):
    """Ctrl-C / SIGTERM on ``seqrec reproduce`` must not leave a peer worker training until its
    deadline (found 2026-12-05: a RecTools run went on for minutes after SIGTERM)."""
    import shutil
    import signal
    import threading
    import time

    from seqrec import stop

    wdir = tmp_path / "workers"
    wdir.mkdir()
    (wdir / "peer_fake.py").write_text(LOOPING_WORKER)
    shutil.copy(peers.worker_dir() / "peer_stop.py", wdir)  # the real helper the workers import
    monkeypatch.setattr(peers, "worker_dir", lambda: wdir)
    work = tmp_path / "run"
    work.mkdir()
    monkeypatch.setitem(
        peers.PEERS,
        "fake",
        {"python": sys.executable, "version": "9.9", "revision": 1, "packages": []},
    )
    cfg = peers.peer_config("peer:fake", {"epochs": 2}, 0)

    def stop_it():
        while not (work / "started").exists() or not (work / "started").read_text():
            time.sleep(0.05)
        time.sleep(0.3)
        if how == "harness":
            stop.request()
        elif how == "worker_signal":  # the worker wrote its pid into "started"
            os.kill(int((work / "started").read_text()), signal.SIGTERM)

    thread = threading.Thread(target=stop_it)
    thread.start()
    t0 = time.time()
    try:
        info = peers.run_worker(
            cfg, Path(sys.executable), work, deadline=t0 + 1.0 if how == "deadline" else None
        )
    finally:
        thread.join()
        stop.clear()
    assert info["stopped"] == ("deadline" if how == "deadline" else "interrupted")
    assert 1 <= info["epochs"] < 100 and time.time() - t0 < 20
    assert not (work / peers.STOP_FILE).exists()  # no stale request for the next call


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_peer_worker_dies_with_the_process_that_started_it(tmp_path):
    """A harness process killed with SIGKILL (a pool worker past its stop grace) must not
    leave the peer's worker training on alone until its deadline."""
    import shutil
    import signal
    import time

    wdir = tmp_path / "workers"
    wdir.mkdir()
    (wdir / "peer_fake.py").write_text(LOOPING_WORKER)
    shutil.copy(peers.worker_dir() / "peer_stop.py", wdir)
    work = tmp_path / "run"
    work.mkdir()
    script = f"""
import sys
from pathlib import Path
from seqrec_lab import peers
peers.worker_dir = lambda: Path({str(wdir)!r})
peers.PEERS["fake"] = {{"python": sys.executable, "version": "9.9", "revision": 1, "packages": []}}
cfg = peers.peer_config("peer:fake", {{"epochs": 2}}, 0)
peers.run_worker(cfg, Path(sys.executable), Path({str(work)!r}), deadline=None)
"""
    harness = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.time() + 60
        while not (work / "started").exists() or not (work / "started").read_text():
            assert time.time() < deadline and harness.poll() is None
            time.sleep(0.05)
        worker = int((work / "started").read_text())
        os.kill(worker, 0)  # running
        harness.kill()
        harness.wait()
        for _ in range(200):
            try:
                os.kill(worker, 0)
                if (
                    Path(f"/proc/{worker}/stat").read_text().split()[2] == "Z"
                ):  # reaped soon by init
                    break
            except (ProcessLookupError, FileNotFoundError):  # gone (reaped between the two calls)
                break
            time.sleep(0.05)
        else:
            os.kill(worker, signal.SIGKILL)
            pytest.fail("the peer worker outlived the process that started it")
    finally:
        if harness.poll() is None:
            harness.kill()


def test_peer_venv_takes_cpu_torch_where_seqrec_runs_a_cpu_build(tmp_path, monkeypatch):
    """A peer's ``torch==X`` pin must not pull the multi-GB CUDA build on a machine without a GPU."""
    calls = []

    def fake_run(cmd, **kw):
        calls.append([str(c) for c in cmd])
        if cmd[1:3] == ["-m", "venv"]:
            (Path(cmd[3]) / "bin").mkdir(parents=True)
            (Path(cmd[3]) / "bin" / "python").touch()
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(peers.subprocess, "run", fake_run)
    monkeypatch.setitem(
        peers.PEERS,
        "fake",
        {
            "python": sys.executable,
            "version": "9.9",
            "revision": 1,
            "packages": ["torch==2.13.0", "fakelib==1.0"],
        },
    )
    monkeypatch.setenv("SEQREC_TORCH_INDEX", "https://example.invalid/cpu")
    python = peers.ensure_venv("fake", tmp_path / "peers")
    installs = [c for c in calls if "install" in c]
    assert installs[0][-6:] == [
        "--index-url",
        "https://example.invalid/cpu",
        "--no-deps",
        "--timeout",
        "30",
        "torch==2.13.0",
    ]
    assert (
        installs[1][-2:] == ["torch==2.13.0", "fakelib==1.0"] and "--index-url" not in installs[1]
    )
    assert (
        peers.ensure_venv("fake", tmp_path / "peers") == python and len(calls) == 3
    )  # installed once
    monkeypatch.setenv("SEQREC_TORCH_INDEX", "default")
    assert peers.torch_index() is None
    monkeypatch.delenv("SEQREC_TORCH_INDEX")
    import torch

    assert peers.torch_index() == (None if torch.version.cuda else peers.CPU_TORCH_INDEX)


def test_peer_venv_errors_say_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setitem(
        peers.PEERS,
        "fake",
        {
            "python": "python-that-is-not-here3.99",
            "version": "9.9",
            "revision": 1,
            "packages": ["fakelib==1.0"],
        },
    )
    with pytest.raises(SeqRecError, match="python-that-is-not-here3.99, which is not on PATH"):
        peers.ensure_venv("fake", tmp_path / "peers")

    def failing_pip(cmd, **kw):
        if cmd[1:3] == ["-m", "venv"]:
            (Path(cmd[3]) / "bin").mkdir(parents=True)
            (Path(cmd[3]) / "bin" / "python").touch()
            return subprocess.CompletedProcess(cmd, 0)
        return subprocess.CompletedProcess(cmd, 1)

    monkeypatch.setattr(peers.subprocess, "run", failing_pip)
    monkeypatch.setitem(
        peers.PEERS,
        "fake",
        {"python": sys.executable, "version": "9.9", "revision": 1, "packages": ["fakelib==1.0"]},
    )
    with pytest.raises(SeqRecError, match="needs a package index; rerun the same command"):
        peers.ensure_venv("fake", tmp_path / "peers")
    assert not (tmp_path / "peers" / "fake" / ".installed.json").exists()  # retried next time


def test_unfinished_peer_state_is_kept_and_restored(tmp_path):
    work = tmp_path / "runs" / "abc123"
    (work / "ckpt").mkdir(parents=True)
    last = bytes(range(256)) * 40 + b"tail"
    for name, data in (
        ("worker_state.json", b"{}"),
        ("ckpt/last.pth", last),
        ("ckpt/best.pth", b"B"),
        ("curve_scores.json", b"{}"),
        ("valid_topk_epoch001.npy", b"N"),
        ("train.csv", b"big export, not state"),
    ):
        (work / name).write_bytes(data)
    state = tmp_path / "state"
    peers.save_state(work, state, finished=False)
    kept = sorted(
        str(p.relative_to(state / "abc123")) for p in (state / "abc123").rglob("*") if p.is_file()
    )
    # checkpoints packed; per-epoch lists and the export left behind (their scores are cached)
    assert kept == [
        "ckpt/best.pth.xz",
        "ckpt/last.pth.xz",
        "curve_scores.json",
        "worker_state.json",
    ]
    assert (state / "abc123" / "ckpt" / "last.pth.xz").stat().st_size < len(last)
    fresh = tmp_path / "fresh" / "abc123"
    fresh.mkdir(parents=True)
    # what the dry run says: the saved state here, the run directory's own checkpoint once restored
    assert peers.resume_source(fresh, None) is None
    assert peers.resume_source(fresh, state)[0] == state / "abc123"
    assert peers.restore_state(fresh, state)
    assert (
        peers.resume_source(fresh, state) == (fresh / "ckpt" / "last.pth", len(last))
        and (fresh / "ckpt" / "last.pth").read_bytes() == last
    )
    assert (fresh / "ckpt" / "best.pth").read_bytes() == b"B" and not (
        fresh / "ckpt" / "last.pth.xz"
    ).exists()
    assert not peers.restore_state(fresh, state)  # a run directory with a checkpoint keeps its own
    peers.save_state(work, state, finished=True)
    assert not (state / "abc123").exists()


def test_curve_scores_are_cached_for_lists_gone_after_a_resume(tmp_path):
    np.save(tmp_path / "valid_topk_epoch001.npy", np.array([[1, 2]]))
    np.save(tmp_path / "valid_topk_epoch002.npy", np.array([[3, 4]]))
    calls = []

    def score(name, lists):
        calls.append(int(lists[0, 0]))
        return type("R", (), {"metrics": {"NDCG@10": float(lists[0, 0]) / 10}})()

    curve = [
        {"epoch": e, "seconds": 1.0 * e, "topk_file": f"valid_topk_epoch{e:03d}.npy"}
        for e in (1, 2)
    ]
    first = peers.score_curve(tmp_path, curve, score)
    assert [h["metrics"]["NDCG@10"] for h in first] == [0.1, 0.3] and calls == [1, 3]
    (tmp_path / "valid_topk_epoch001.npy").unlink()  # a resumed run on a fresh checkout
    again = peers.score_curve(tmp_path, curve, score)
    assert again == first and calls == [1, 3, 3]
    (tmp_path / peers.CURVE_SCORES).unlink()
    with pytest.raises(SeqRecError, match="neither on disk nor scored"):
        peers.score_curve(tmp_path, curve, score)


def test_same_key_other_budget_keeps_both_records(tmp_path):
    """The peers table's seqrec row and a defaults-table row differ only in their budget (one key):
    the second record must not overwrite the first."""
    from seqrec_lab.runner import write_record

    a = {"identity": {"model_config": {"max_train_seconds": 90.0}}, "x": 1}
    b = {"identity": {"model_config": {"max_train_seconds": 0.0}}, "x": 2}
    pa = write_record(a, tmp_path, "k", False)
    pb = write_record(b, tmp_path, "k", False)
    assert (
        pa != pb and json.loads(pa.read_text())["x"] == 1 and json.loads(pb.read_text())["x"] == 2
    )
    assert write_record(a, tmp_path, "k", False) == pa  # the same identity rewrites its own file


def test_time_to_reach_reads_the_validation_curve():
    from seqrec_lab.peers_report import best_point, seconds_to_reach

    rec = {
        "validation_history": [
            {"epoch": e, "train_seconds": 10.0 * e, "metrics": {"NDCG@10": v}}
            for e, v in ((1, 0.05), (2, 0.09), (3, 0.12), (4, 0.11))
        ]
    }
    assert best_point(rec)["epoch"] == 3
    assert seconds_to_reach(rec, 0.09) == 20.0 and seconds_to_reach(rec, 0.10) == 30.0
    assert seconds_to_reach(rec, 0.2) is None


def _peer_select():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "peer_select", peers.worker_dir() / "peer_select.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_peer_selection_scores_lists_as_the_evaluator_does():
    """The workers' own NDCG@10 (what they select epochs on) is seqrec's evaluator's."""
    rng = np.random.default_rng(1)
    n_items, n_users = 40, 25
    rows = [
        list(rng.choice(np.arange(1, n_items + 1), size=int(rng.integers(3, 9)), replace=False))
        for _ in range(n_users)
    ]
    offsets = np.concatenate([[0], np.cumsum([len(r) for r in rows])])
    seqs = Sequences(offsets, np.concatenate(rows), n_items=n_items)
    targets = Targets(seqs, np.arange(n_users), seqs.lengths - 1, np.array([r[-1] for r in rows]))
    hist = targets.histories()
    tops = []
    for i in range(n_users):
        order = [x for x in rng.permutation(np.arange(1, n_items + 1)) if x not in hist.row(i)]
        if i % 3 == 0:  # put the target in the list at a random rank (hits are not rare)
            order.remove(rows[i][-1])
            order.insert(int(rng.integers(0, 10)), rows[i][-1])
        tops.append(order[:20])
    tops = np.array(tops)
    lists = peers.TopKLists(hist, np.arange(n_users), tops, n_items, max_len=50)
    truth = evaluate(lists, targets, ks=(10,), seen_filter="history").metrics["NDCG@10"]
    got = _peer_select().ndcg_at(tops, np.array([r[-1] for r in rows]), 10)
    assert truth > 0 and abs(got - truth) < 1e-12


def test_peer_best_epoch_waits_patience_epochs_and_keeps_the_first_best():
    pick = _peer_select().BestEpoch(patience=2)
    seen = [
        (e, pick.update(e, s), pick.exhausted(e)) for e, s in enumerate([0.1, 0.3, 0.3, 0.2], 1)
    ]
    assert seen == [(1, True, False), (2, True, False), (3, False, False), (4, False, True)]
    assert pick.state == {"best_epoch": 2, "best_score": 0.3}
    again = _peer_select().BestEpoch(2, dict(pick.state))  # restored from a worker's state file
    assert again.exhausted(4) and not again.update(5, 0.3)


def test_peer_selection_is_part_of_the_identity_and_checked():
    with pytest.raises(ConfigError, match="selection"):
        peers.PeerConfig(selection="last")
    a, b = peers.PeerConfig(), peers.PeerConfig(selection="filtered")
    assert dataclasses.asdict(a)["selection"] == "library" != dataclasses.asdict(b)["selection"]
