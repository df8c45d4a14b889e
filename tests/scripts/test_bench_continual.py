"""benchmarks/bench_continual.py: the test targets see only earlier events, the validation carve
holds out each recent user's last event, and a tiny run writes every step and resumes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = "bench_continual.py"  # loaded by conftest.bench


def _log(n_users=40, n_items=30, per_user=25, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(n_users):
        start = rng.integers(0, 1000)
        for k in range(per_user):
            # items drift with time so late windows hold items the early ones never saw
            item = int(rng.integers(0, n_items // 2) + (n_items // 2) * (start + 40 * k > 1400))
            rows.append((f"u{u}", f"i{item}", int(start + 40 * k + rng.integers(0, 5))))
    return rows


def test_targets_see_only_earlier_known_events(bench):
    rows = _log()
    users = np.asarray([r[0] for r in rows], dtype=object)
    items = np.asarray([r[1] for r in rows], dtype=object)
    times = np.asarray([r[2] for r in rows], np.int64)
    known = sorted(set(items[times < 1500].tolist()))
    model = SimpleNamespace(vocab=SimpleNamespace(raw=np.asarray(known, dtype=object)))
    model.n_items = len(known)
    hist, test = times < 1500, (times >= 1500) & (times < 1800)
    targets, meta = bench.targets_for(model, users, items, times, hist, test)
    assert len(targets) > 20 and len(meta) == len(targets)
    raw = {k + 1: r for k, r in enumerate(known)}
    for t, i in enumerate(meta):
        row = targets.sequences.row(int(targets.rows[t]))
        seen = [raw[int(x)] for x in row[: targets.cutoffs[t]]]
        assert raw[int(targets.items[t])] == items[i] and test[i]
        earlier = [
            j
            for j in np.flatnonzero(users == users[i])
            if (times[j], j) < (times[i], i) and (hist[j] or test[j]) and items[j] in known
        ]
        earlier.sort(key=lambda j: (times[j], j))
        assert seen == [items[j] for j in earlier]
    # every test event of a known item with a known earlier event is a target
    expected = sum(
        1
        for i in np.flatnonzero(test)
        if items[i] in known
        and any(
            (times[j], j) < (times[i], i) and items[j] in known
            for j in np.flatnonzero((users == users[i]) & (hist | test))
        )
    )
    assert len(targets) == expected


def _write_csv(path: Path) -> Path:
    lines = ["user_id,item_id,timestamp"] + [f"{u},{i},{t}" for u, i, t in _log()]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_carve_holds_out_recent_users_last_event(bench, tmp_path):
    from seqrec.data.preprocess import PreprocessConfig, preprocess
    from seqrec.data.sources import load

    prepared = preprocess(load(_write_csv(tmp_path / "log.csv")), PreprocessConfig(filter="none"))
    full = prepared.sequences()
    train, valid = bench.carve(prepared, recent_from=1500)
    last_times = full.timestamps[full.offsets[1:] - 1]
    held = np.flatnonzero((last_times >= 1500) & (full.lengths >= 2))
    assert 0 < len(held) < len(full.lengths)
    assert valid.rows.tolist() == held.tolist()
    assert (train.lengths == full.lengths - np.isin(np.arange(len(full.lengths)), held)).all()
    assert (valid.items == full.items[full.offsets[held + 1] - 1]).all()


@pytest.mark.slow
def test_a_tiny_run_writes_every_step_and_resumes(tmp_path):
    data = _write_csv(tmp_path / "log.csv")
    out = tmp_path / "continual"
    cmd = [
        sys.executable,
        str(ROOT / "benchmarks" / SCRIPT),
        "--data",
        str(data),
        "--seeds",
        "0",
        "--max-epochs",
        "2",
        "--patience",
        "1",
        "--grid",
        "1:none",
        "1:0.5",
        "--set",
        "dim=8",
        "--set",
        "n_blocks=1",
        "--set",
        "max_len=10",
        "--out",
        str(out),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads(out.with_suffix(".json").read_text())
    (run,) = record["runs"]
    assert run["finished"] and [s["step"] for s in run["steps"]] == [1, 2, 3]
    assert record["selection"]["chosen"] in ("1:none", "1:0.5")
    for s in run["steps"]:
        assert s["update_over_retrain_cpu"] == pytest.approx(
            s["update"]["cpu_seconds"] / s["retrain"]["cpu_seconds"]
        )
        assert s["update"]["all"]["targets"] == s["retrain"]["all"]["targets"] > 0
    assert "| 0 | 3 |" in out.with_suffix(".md").read_text()
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert again.returncode == 0 and "finished seeds [0]" in again.stdout
    assert json.loads(out.with_suffix(".json").read_text())["runs"] == record["runs"]
    # a second seed in its own process takes the first one's choice; the records merge
    other = out.with_name("continual.seed1")  # a dot in the stem
    seed1 = [*cmd[: cmd.index("--seeds") + 1], "1", *cmd[cmd.index("--seeds") + 2 : -2]]
    seed1 += ["--selection-from", str(out.with_suffix(".json")), "--out", str(other)]
    proc = subprocess.run(seed1, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(Path(str(other) + ".json").read_text())["selection"] == record["selection"]
    merged = tmp_path / "merged"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / SCRIPT),
            "--merge",
            str(out.with_suffix(".json")),
            str(other) + ".json",
            "--out",
            str(merged),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    both = json.loads(merged.with_suffix(".json").read_text())
    assert [r["seed"] for r in both["runs"]] == [0, 1] and len(both["merged_from"]) == 2
    assert both["mean"]["ndcg_kept"] == pytest.approx(
        sum(s["ndcg_kept"] for r in both["runs"] for s in r["steps"]) / 6
    )
    assert str(tmp_path) not in Path(str(merged) + ".md").read_text()  # no machine's folders


def test_update_candidates_parse_epochs_replay_and_learning_rate(bench):
    assert bench.parse_candidate("4") == (4, "all", None)
    assert bench.parse_candidate("2:none") == (2, "none", None)
    epochs, replay, lr = bench.parse_candidate("8:0.5:1e-3")
    assert (epochs, replay, lr) == (8, 0.5, 1e-3)
    for bad in ("x:all", "4:all:1e-3:extra", "4:all:fast", ""):
        with pytest.raises(SystemExit, match="EPOCHS"):
            bench.parse_candidate(bad)
    for cand in bench.DEFAULT_GRID:  # every default candidate is well-formed
        bench.parse_candidate(cand)


def test_selection_falls_back_to_the_cheapest_within_one_standard_error(bench):
    def cand(name, cpu, ndcg, se=0.02):
        return {"candidate": name, "cpu_seconds": cpu, "valid_ndcg10": ndcg, "valid_ndcg10_se": se}

    cands = [cand("1:none", 1, 0.08), cand("4:all", 7, 0.125), cand("8:all", 14, 0.136)]
    # the bar reached: the cheapest that reaches it, whatever the fallback
    assert bench.select_update(cands, 0.12)[0]["candidate"] == "4:all"
    assert bench.select_update(cands, 0.12, "best") == (cands[1], "")
    # none reaches the bar: one-se takes 4:all (0.125 >= 0.136 - 0.02), not 1:none
    pick, how = bench.select_update(cands, 0.14)
    assert pick["candidate"] == "4:all" and "one standard error" in how
    assert bench.select_update(cands, 0.14, "best")[0]["candidate"] == "8:all"
    # a tighter error leaves only the best
    tight = [dict(c, valid_ndcg10_se=0.005) for c in cands]
    assert bench.select_update(tight, 0.14)[0]["candidate"] == "8:all"
    with pytest.raises(ValueError, match="fallback"):
        bench.select_update(cands, 0.14, "worst")
